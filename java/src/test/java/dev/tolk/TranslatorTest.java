package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class TranslatorTest {
  static final List<String> TEXTS =
      List.of(
          "Open the file. Save it.",
          "Hello world",
          "The quick brown fox jumps over the lazy dog.",
          "Dr. Smith paid $3.50 for 2 apples, didn't he?",
          "");

  static Translator tiny;

  @BeforeAll
  static void load() {
    tiny = Tolk.translator(Fixtures.MARIAN_TINY, new Translator.Options().threads(1));
  }

  @AfterAll
  static void free() {
    tiny.close();
  }

  private static String[] cliArgs(Path model, String... extra) {
    List<String> a = new ArrayList<>(List.of("translate", "-m", model.toString(), "--threads", "1"));
    a.addAll(Arrays.asList(extra));
    a.addAll(TEXTS);
    return a.toArray(String[]::new);
  }

  @Test
  void translationsEqualTheCli() {
    assertEquals(Fixtures.cli(cliArgs(Fixtures.MARIAN_TINY)), tiny.translate(TEXTS));
  }

  @Test
  void beamAndMaxNewTokensEqualTheCli() {
    List<String> want = Fixtures.cli(cliArgs(Fixtures.MARIAN_TINY, "--beam", "1", "--max-new-tokens", "3"));
    List<String> got = tiny.translate(TEXTS, new GenerateOptions().beam(1).maxNewTokens(3));
    assertEquals(want, got);
    // The options do change something, or the comparison above proves little.
    assertFalse(got.equals(tiny.translate(TEXTS)), "beam 1 and 3 tokens translated as the defaults");
  }

  @Test
  void bundledInt8ModelEqualsTheCli() {
    try (Translator demo = Tolk.translator(Fixtures.DEMO, new Translator.Options().threads(1).int8(true))) {
      assertEquals(Fixtures.cli(cliArgs(Fixtures.DEMO, "--int8")), demo.translate(TEXTS));
      assertEquals(
          Fixtures.cli("translate", "-m", Fixtures.DEMO.toString(), "--threads", "1", "--to", "zh-Hant", TEXTS.get(0)),
          List.of(demo.translateText(TEXTS.get(0), new GenerateOptions().target("zh-Hant")).text()));
    }
  }

  private static final Pattern JSON =
      Pattern.compile("\"line\":(\\d+),\"source\":\"(.*?)\",\"translation\":\"(.*?)\",\"ids\":\\[([0-9,]*)\\],\"score\":([-0-9.e+]+)");

  @Test
  void batchOfSentencesEqualsTheCli() {
    // One sentence each: the batched path must give what tolk translate gives for each alone.
    List<String> sentences = List.of(TEXTS.get(1), TEXTS.get(2), "Save it.", "Open the file.", "Cancel");
    List<String> args = new ArrayList<>(List.of("translate", "-m", Fixtures.MARIAN_TINY.toString(), "--threads", "1"));
    args.addAll(sentences);
    assertEquals(Fixtures.cli(args.toArray(String[]::new)), tiny.translateBatch(sentences));
    args.addAll(5, List.of("--beam", "2"));
    assertEquals(
        Fixtures.cli(args.toArray(String[]::new)), tiny.translateBatch(sentences, new GenerateOptions().beam(2)));
    assertEquals(List.of(), tiny.translateBatch(List.of()));
    assertThrows(IllegalArgumentException.class, () -> tiny.translateBatch(List.of("a\0b")));
  }

  @Test
  void sentencesEqualTheCliJson() {
    String text = TEXTS.get(0) + "\n" + TEXTS.get(2);
    List<String> lines = Fixtures.cli("translate", "-m", Fixtures.MARIAN_TINY.toString(), "--threads", "1", "--json", text);
    Translation t = tiny.translateText(text, new GenerateOptions());
    assertEquals(lines.size(), t.sentences().size());
    assertEquals(3, lines.size());
    for (int i = 0; i < lines.size(); i++) {
      Matcher m = JSON.matcher(lines.get(i));
      assertTrue(m.find(), lines.get(i));
      Translation.Sentence s = t.sentences().get(i);
      assertEquals(Long.parseLong(m.group(1)), s.line() + 1);
      assertEquals(m.group(2), s.source());
      assertEquals(m.group(3), s.translation());
      int[] ids = Arrays.stream(m.group(4).split(",")).mapToInt(Integer::parseInt).toArray();
      assertArrayEquals(ids, s.ids());
      assertEquals((float) Double.parseDouble(m.group(5)), s.score());
    }
    String first = t.sentences().get(0).translation() + t.sentences().get(1).translation();
    assertEquals(first.replace(" ", ""), t.text().split("\n")[0].replace(" ", ""));
  }

  @Test
  void defaultsAreTheModelsGenerationConfig() {
    GenerateOptions d = tiny.defaultOptions();
    // tests/fixtures/marian-tiny/generation_config.json: num_beams 4, max_length 512.
    assertEquals(4, d.beam());
    assertEquals(512, d.maxLength());
    assertEquals(1.0f, d.lengthPenalty());
    assertTrue(d.batchTokens() > 0, "batch_tokens " + d.batchTokens());
  }

  @Test
  void severalThreadsShareOneTranslator() throws Exception {
    List<String> want = tiny.translate(TEXTS);
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<List<String>>> runs = new ArrayList<>();
      for (int i = 0; i < 8; i++) runs.add(pool.submit(() -> tiny.translate(TEXTS)));
      for (Future<List<String>> f : runs) assertEquals(want, f.get());
    } finally {
      pool.shutdown();
    }
  }

  @Test
  void closingWhileOthersTranslateNeverCrashes() throws Exception {
    Translator tr = Tolk.translator(Fixtures.MARIAN_TINY, new Translator.Options().threads(1));
    String want = tr.translate(TEXTS.get(0));
    AtomicInteger done = new AtomicInteger(), refused = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try {
      List<Future<?>> runs = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        runs.add(
            pool.submit(
                () -> {
                  for (int k = 0; k < 50; k++) {
                    try {
                      assertEquals(want, tr.translate(TEXTS.get(0)));
                      done.incrementAndGet();
                    } catch (IllegalStateException e) {
                      assertEquals("translator is closed", e.getMessage());
                      refused.incrementAndGet();
                    }
                  }
                }));
      }
      while (done.get() < 3) Thread.onSpinWait();
      tr.close();
      for (Future<?> f : runs) f.get();
    } finally {
      pool.shutdown();
    }
    assertTrue(done.get() >= 3);
    assertEquals(150, done.get() + refused.get());
    assertTrue(refused.get() > 0, "no call saw the translator closed");
  }

  @Test
  void useAfterCloseThrows() {
    Translator tr = Tolk.translator(Fixtures.MARIAN_TINY);
    Tokenizer tok = tr.tokenizer();
    assertEquals(tr.tokenizer().encode("Hello").length, tok.encode("Hello").length);
    tr.close();
    tr.close(); // a second close does nothing
    assertTrue(tr.isClosed());
    assertTrue(tok.isClosed());
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> tr.translate("Hello"));
    assertEquals("translator is closed", e.getMessage());
    assertThrows(IllegalStateException.class, tr::tokenizer);
    assertThrows(IllegalStateException.class, tr::defaultOptions);
    // The borrowed tokenizer died with its translator.
    assertThrows(IllegalStateException.class, () -> tok.encode("Hello"));
  }

  @Test
  void missingModelFolderIsNamed() {
    Path missing = Fixtures.ROOT.resolve("no-such-model");
    TolkException e = assertThrows(TolkException.class, () -> Tolk.translator(missing));
    assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
    assertTrue(
        e.status() == TolkException.Status.NOT_FOUND || e.status() == TolkException.Status.IO,
        e.status() + ": " + e.getMessage());
  }

  @Test
  void folderWithoutAModelIsRefused() {
    // simple-cnn holds an ONNX model but no translation model files.
    TolkException e = assertThrows(TolkException.class, () -> Tolk.translator(Fixtures.SIMPLE_CNN));
    assertTrue(e.getMessage().contains("simple-cnn"), e.getMessage());
  }

  @Test
  void unknownTargetIsRefused() {
    TolkException.NotFound e =
        assertThrows(TolkException.NotFound.class, () -> tiny.translateText("Hi", new GenerateOptions().target("fr")));
    assertEquals(TolkException.Status.NOT_FOUND, e.status());
    assertTrue(e.getMessage().startsWith("the model has no tag for 'fr'; its tags: >>"), e.getMessage());
  }

  @Test
  void badOptionsAreRefusedBeforeTheCall() {
    assertThrows(IllegalArgumentException.class, () -> new GenerateOptions().beam(0));
    assertThrows(IllegalArgumentException.class, () -> new GenerateOptions().maxNewTokens(-1));
    assertThrows(NullPointerException.class, () -> tiny.translate((List<String>) null));
  }
}
