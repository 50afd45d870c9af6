package dev.tolk;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A Marian tokenizer as HuggingFace's MarianTokenizer (a {@code tolk_tokenizer}): source.spm
 * encodes, target.spm decodes, vocab.json maps pieces to ids. Safe to use from many threads at
 * once. One made by {@link Tolk#tokenizer} is closed by its owner; {@link Translator#tokenizer}'s
 * lives as long as its translator.
 */
public final class Tokenizer extends Handle {
  Tokenizer(MemorySegment ptr, Handle owner) {
    super(ptr, "tokenizer", owner);
  }

  @Override
  void free(MemorySegment p) {
    Native.tokenizerFree(p);
  }

  /**
   * Loads source.spm, target.spm, vocab.json and tokenizer_config.json from `dir`.
   *
   * @throws TolkException.NotFound / Io naming a missing file, Malformed for a broken one
   */
  static Tokenizer create(Path dir) {
    Library.lookup();
    Objects.requireNonNull(dir, "dir");
    try (Arena a = Arena.ofConfined()) {
      MemorySegment params = Native.tokenizerDefaults(a);
      MemorySegment out = a.allocate(ADDRESS);
      MemorySegment err = Native.newError(a);
      Native.check(Native.tokenizerCreate(a.allocateFrom(dir.toString()), params, out, err), err);
      return new Tokenizer(out.get(ADDRESS, 0), null);
    }
  }

  // tolk.h's TOLK_TOKENIZE_* and TOLK_DECODE_* flags.
  private static final int TOKENIZE_TARGET = 1, TOKENIZE_NO_EOS = 2;
  private static final int DECODE_SKIP_SPECIAL = 1, DECODE_SOURCE = 2;

  /** The ids of `text` on the source side, ending in {@code </s>}, as MarianTokenizer gives them. */
  public int[] encode(String text) {
    return encode(List.of(text), false, true).get(0);
  }

  /**
   * The ids of each text. Any text is accepted; a leading language tag (">>cmn_Hans<<") maps
   * straight to its id.
   *
   * @param target encode with the target side's model (labels) rather than the source's
   * @param eos append {@code </s>}
   */
  public List<int[]> encode(List<String> texts, boolean target, boolean eos) {
    Objects.requireNonNull(texts, "texts");
    int flags = (target ? TOKENIZE_TARGET : 0) | (eos ? 0 : TOKENIZE_NO_EOS);
    int n = texts.size();
    MemorySegment t = acquire();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment ptrs = a.allocate(ADDRESS, Math.max(1, n));
      MemorySegment lens = a.allocate(JAVA_LONG, Math.max(1, n));
      for (int i = 0; i < n; i++) {
        byte[] b = Objects.requireNonNull(texts.get(i), "text").getBytes(StandardCharsets.UTF_8);
        MemorySegment s = a.allocate(Math.max(1, b.length));
        MemorySegment.copy(b, 0, s, JAVA_BYTE, 0, b.length);
        ptrs.setAtIndex(ADDRESS, i, s);
        lens.setAtIndex(JAVA_LONG, i, b.length);
      }
      MemorySegment out = a.allocate(Native.IDS_SIZE * Math.max(1, n), 8);
      MemorySegment err = Native.newError(a);
      Native.check(Native.encodeBatch(t, ptrs, lens, n, flags, out, err), err);
      try {
        List<int[]> ids = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          MemorySegment e = out.asSlice(i * Native.IDS_SIZE, Native.IDS_SIZE);
          long len = e.get(JAVA_LONG, Native.IDS_N);
          ids.add(len == 0 ? new int[0] : e.get(ADDRESS, Native.IDS_PTR).reinterpret(4 * len).toArray(JAVA_INT));
        }
        return ids;
      } finally {
        Native.idsFree(out, n);
      }
    } finally {
      release();
    }
  }

  /** The text of target-side ids, special tokens dropped, as MarianTokenizer.decode(…, skip_special_tokens=True). */
  public String decode(int[] ids) {
    return decode(List.of(ids), true, false).get(0);
  }

  /**
   * The text of each id sequence; ids outside the vocabulary decode as {@code <unk>}.
   *
   * @param skipSpecial drop {@code </s>}, {@code <unk>} and {@code <pad>}
   * @param source decode with the source side's model
   */
  public List<String> decode(List<int[]> ids, boolean skipSpecial, boolean source) {
    Objects.requireNonNull(ids, "ids");
    int flags = (skipSpecial ? DECODE_SKIP_SPECIAL : 0) | (source ? DECODE_SOURCE : 0);
    int n = ids.size();
    MemorySegment t = acquire();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment in = a.allocate(Native.IDS_SIZE * Math.max(1, n), 8);
      for (int i = 0; i < n; i++) {
        int[] seq = Objects.requireNonNull(ids.get(i), "ids");
        MemorySegment e = in.asSlice(i * Native.IDS_SIZE, Native.IDS_SIZE);
        e.set(ADDRESS, Native.IDS_PTR, a.allocateFrom(JAVA_INT, seq));
        e.set(JAVA_LONG, Native.IDS_N, seq.length);
      }
      MemorySegment out = a.allocate(ADDRESS, Math.max(1, n));
      MemorySegment err = Native.newError(a);
      Native.check(Native.decodeBatch(t, in, n, flags, out, err), err);
      try {
        List<String> texts = new ArrayList<>(n);
        for (int i = 0; i < n; i++) texts.add(Native.string(out.getAtIndex(ADDRESS, i)));
        return texts;
      } finally {
        Native.stringsFree(out, n);
      }
    } finally {
      release();
    }
  }

  /**
   * The tokens of `text` before they become ids — language tag, special tokens and
   * sentencepiece pieces — as MarianTokenizer.tokenize() gives them (no {@code </s>}).
   */
  public List<String> tokenize(String text) {
    byte[] b = Objects.requireNonNull(text, "text").getBytes(StandardCharsets.UTF_8);
    MemorySegment t = acquire();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment s = a.allocate(Math.max(1, b.length));
      MemorySegment.copy(b, 0, s, JAVA_BYTE, 0, b.length);
      MemorySegment out = a.allocate(Native.TOKENS_SIZE, 8);
      MemorySegment err = Native.newError(a);
      Native.check(Native.tokenize(t, s, b.length, 0, out, err), err);
      try {
        long n = out.get(JAVA_LONG, 8);
        List<String> tokens = new ArrayList<>((int) n);
        MemorySegment arr = n == 0 ? MemorySegment.NULL : out.get(ADDRESS, 0).reinterpret(8 * n);
        for (long i = 0; i < n; i++) tokens.add(Native.string(arr.getAtIndex(ADDRESS, i)));
        return tokens;
      } finally {
        Native.tokensFree(out);
      }
    } finally {
      release();
    }
  }

  /** Entries of the vocabulary. */
  public long vocabSize() {
    MemorySegment t = acquire();
    try {
      return Native.vocabSize(t);
    } finally {
      release();
    }
  }

  /** The piece of `id`, or null when it is out of range. */
  public String idToPiece(int id) {
    MemorySegment t = acquire();
    try {
      return Native.idToPiece(t, id);
    } finally {
      release();
    }
  }

  /** The id of `piece`, or -1 when it is not in the vocabulary. */
  public int pieceToId(String piece) {
    Objects.requireNonNull(piece, "piece");
    MemorySegment t = acquire();
    try (Arena a = Arena.ofConfined()) {
      return Native.pieceToId(t, a.allocateFrom(piece));
    } finally {
      release();
    }
  }

  /** The target-language tags of the vocabulary (">>cmn_Hans<<", …) in id order. */
  public String[] languageTags() {
    MemorySegment t = acquire();
    try {
      return Native.languageTags(t);
    } finally {
      release();
    }
  }

  /** The id of {@code </s>}. */
  public int eosId() {
    return special()[0];
  }

  /** The id of {@code <unk>}. */
  public int unkId() {
    return special()[1];
  }

  /** The id of {@code <pad>}. */
  public int padId() {
    return special()[2];
  }

  private int[] special() {
    MemorySegment t = acquire();
    try {
      return Native.specialIds(t);
    } finally {
      release();
    }
  }

  @Override
  public String toString() {
    return isClosed() ? "Tokenizer(closed)" : "Tokenizer(" + vocabSize() + " pieces)";
  }
}
