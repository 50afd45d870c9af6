package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The tokenizer against `tolk tokenize` / `tolk detokenize` on the same model folder. */
class TokenizerTest {
  static final List<String> TEXTS =
      List.of("Hello world.", ">>cmn_Hans<< Open the file.", "naïve café — 3.14 ×2", "", "  spaces  ");

  static Tokenizer tok;

  @BeforeAll
  static void load() {
    tok = Tolk.tokenizer(Fixtures.MARIAN_TINY);
  }

  @AfterAll
  static void free() {
    tok.close();
  }

  private static int[] ints(String line) {
    return line.isEmpty() ? new int[0] : Arrays.stream(line.trim().split(" ")).mapToInt(Integer::parseInt).toArray();
  }

  @Test
  void encodeEqualsTheCli() {
    List<String> args = new ArrayList<>(List.of("tokenize", "-m", Fixtures.MARIAN_TINY.toString()));
    args.addAll(TEXTS);
    List<String> want = Fixtures.cli(args.toArray(String[]::new));
    List<int[]> got = tok.encode(TEXTS, false, true);
    assertEquals(TEXTS.size(), want.size());
    for (int i = 0; i < TEXTS.size(); i++) assertArrayEquals(ints(want.get(i)), got.get(i), TEXTS.get(i));
    assertArrayEquals(got.get(0), tok.encode(TEXTS.get(0)));
    assertEquals(tok.eosId(), got.get(0)[got.get(0).length - 1]);
    assertEquals(tok.pieceToId(">>cmn_Hans<<"), got.get(1)[0]);
  }

  @Test
  void targetSideAndNoEosEqualTheCli() {
    List<String> want = Fixtures.cli("tokenize", "-m", Fixtures.MARIAN_TINY.toString(), "--target", "--no-eos", TEXTS.get(0));
    assertArrayEquals(ints(want.get(0)), tok.encode(List.of(TEXTS.get(0)), true, false).get(0));
  }

  @Test
  void tokenizeEqualsTheCliPieces() {
    for (String text : TEXTS) {
      if (text.isEmpty()) continue;
      List<String> want = Fixtures.cli("tokenize", "-m", Fixtures.MARIAN_TINY.toString(), "--pieces", text);
      assertEquals(want.get(0), String.join(" ", tok.tokenize(text)), text);
    }
  }

  @Test
  void decodeEqualsTheCli() {
    int[] ids = {2, 513, 61, 23, 0, 99999};
    String idArgs = Arrays.stream(ids).mapToObj(Integer::toString).collect(Collectors.joining(" "));
    String m = Fixtures.MARIAN_TINY.toString();
    List<String> skip = Fixtures.cli(("detokenize -m " + m + " " + idArgs).split(" "));
    List<String> keep = Fixtures.cli(("detokenize -m " + m + " --keep-special " + idArgs).split(" "));
    assertEquals(skip.get(0), tok.decode(ids));
    assertEquals(keep.get(0), tok.decode(List.of(ids), false, false).get(0));
    assertTrue(keep.get(0).contains("<unk>"), keep.get(0));
  }

  @Test
  void vocabularyLookups() {
    assertTrue(tok.vocabSize() > 100);
    int id = tok.pieceToId("▁H");
    assertTrue(id >= 0);
    assertEquals("▁H", tok.idToPiece(id));
    assertEquals(-1, tok.pieceToId("no such piece"));
    assertNull(tok.idToPiece(-5));
    assertTrue(Arrays.asList(tok.languageTags()).contains(">>cmn_Hans<<"));
    assertTrue(tok.eosId() != tok.padId());
  }

  @Test
  void missingFilesAreNamed() {
    TolkException e = assertThrows(TolkException.class, () -> Tolk.tokenizer(Fixtures.SIMPLE_CNN));
    assertTrue(e.getMessage().contains("simple-cnn"), e.getMessage());
  }

  @Test
  void useAfterCloseThrows() {
    Tokenizer t = Tolk.tokenizer(Fixtures.MARIAN_TINY);
    t.close();
    assertThrows(IllegalStateException.class, () -> t.encode("Hello"));
    assertThrows(IllegalStateException.class, () -> t.decode(new int[] {1}));
    assertThrows(IllegalStateException.class, () -> t.tokenize("Hello"));
    assertThrows(IllegalStateException.class, t::vocabSize);
  }
}
