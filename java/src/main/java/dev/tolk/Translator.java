package dev.tolk;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A Marian translation model loaded from a folder in HuggingFace Optimum's export layout (a
 * {@code tolk_translator}). Each text is translated as {@code tolk translate} translates it:
 * split into sentences, batched and rejoined with its line breaks; the output equals the CLI's.
 *
 * <p>One translator serves many threads at once; {@link #close()} waits for the translations
 * in flight, and calls after it throw IllegalStateException.
 */
public final class Translator extends Handle {
  /** Loading settings; the defaults are libtolk's. */
  public static final class Options {
    private int threads;
    private boolean int8;
    private boolean verify = true;

    /** Intra-op threads per run; 0 (the default): the machine's cores. */
    public Options threads(int threads) {
      this.threads = threads;
      return this;
    }

    /** Run the *_quantized.onnx graphs (folders holding only those run them anyway). */
    public Options int8(boolean int8) {
      this.int8 = int8;
      return this;
    }

    /** Check tolk-manifest.json checksums when the folder has one (true by default). */
    public Options verify(boolean verify) {
      this.verify = verify;
      return this;
    }
  }

  // The CLI's --to names (cli/cmd_translate.c) and the tags each may stand for, first found wins.
  private static final String[][] TARGETS = {
    {"zh", ">>cmn_Hans<<", ">>cmn<<", ">>zho_Hans<<"},
    {"zh-Hans", ">>cmn_Hans<<", ">>cmn<<"},
    {"zh-Hant", ">>cmn_Hant<<", ">>zho_Hant<<"},
    {"zh-TW", ">>cmn_Hant<<"},
    {"yue", ">>yue_Hant<<", ">>yue_Hans<<", ">>yue<<"},
    {"yue-Hans", ">>yue_Hans<<"},
    {"yue-Hant", ">>yue_Hant<<"}
  };

  private final Tokenizer tokenizer;

  private Translator(MemorySegment ptr) {
    super(ptr, "translator", null);
    this.tokenizer = new Tokenizer(Native.translatorTokenizer(ptr), this);
  }

  @Override
  void free(MemorySegment p) {
    Native.translatorFree(p);
  }

  /**
   * Loads the model folder.
   *
   * @throws TolkException.NotFound / Io for a missing folder or file (named), InvalidModel for
   *     inconsistent files or checksums that do not match the manifest
   */
  static Translator create(Path dir, Options options) {
    Library.lookup();
    Objects.requireNonNull(dir, "dir");
    try (Arena a = Arena.ofConfined()) {
      MemorySegment params = Native.translatorDefaults(a);
      params.set(JAVA_INT, 0, options.threads);
      params.set(JAVA_INT, 4, options.int8 ? 1 : 0);
      params.set(JAVA_INT, 8, options.verify ? 1 : 0);
      MemorySegment out = a.allocate(ADDRESS);
      MemorySegment err = Native.newError(a);
      Native.check(Native.translatorCreate(a.allocateFrom(dir.toString()), params, out, err), err);
      return new Translator(out.get(ADDRESS, 0));
    }
  }

  /** The model's own generation settings (generation_config.json, then config.json). */
  public GenerateOptions defaultOptions() {
    MemorySegment tr = acquire();
    try (Arena a = Arena.ofConfined()) {
      return GenerateOptions.read(Native.generateDefaults(a, tr));
    } finally {
      release();
    }
  }

  /** The model's tokenizer; it lives as long as the translator (closing it does nothing). */
  public Tokenizer tokenizer() {
    acquire();
    release();
    return tokenizer;
  }

  /** Translates one text with the model's defaults. */
  public String translate(String text) {
    return translateText(text, new GenerateOptions()).text();
  }

  /** Translates each text with the model's defaults; out[i] is the translation of texts[i]. */
  public List<String> translate(List<String> texts) {
    return translate(texts, new GenerateOptions());
  }

  /** Translates each text with `options`; out[i] is the translation of texts[i]. */
  public List<String> translate(List<String> texts, GenerateOptions options) {
    Objects.requireNonNull(texts, "texts");
    List<String> out = new ArrayList<>(texts.size());
    for (String t : texts) out.add(translateText(t, options).text());
    return out;
  }

  /** {@link #translateBatch(List, GenerateOptions)} with the model's defaults. */
  public List<String> translateBatch(List<String> sentences) {
    return translateBatch(sentences, new GenerateOptions());
  }

  /**
   * Translates each string as one model input, all in one batch (as CTranslate2's
   * translate_batch and the Python package's do), where {@link #translate(List, GenerateOptions)}
   * runs one text at a time, split into sentences. A string of one sentence gets the same
   * translation either way (a sentence translates the same in any batch).
   *
   * @throws IllegalArgumentException for a string holding a NUL character
   */
  public List<String> translateBatch(List<String> sentences, GenerateOptions options) {
    Objects.requireNonNull(sentences, "sentences");
    Objects.requireNonNull(options, "options");
    int n = sentences.size();
    MemorySegment tr = acquire();
    try (Arena a = Arena.ofConfined()) {
      String tag = resolveTarget(options.target());
      MemorySegment params = Native.generateDefaults(a, tr);
      options.applyTo(params);
      MemorySegment texts = a.allocate(ADDRESS, Math.max(1, n));
      for (int i = 0; i < n; i++) {
        String s = Objects.requireNonNull(sentences.get(i), "sentence");
        if (s.indexOf('\0') >= 0) throw new IllegalArgumentException("sentence " + i + " holds a NUL");
        texts.setAtIndex(ADDRESS, i, a.allocateFrom(s));
      }
      MemorySegment out = a.allocate(ADDRESS, Math.max(1, n));
      MemorySegment err = Native.newError(a);
      MemorySegment tagz = tag == null ? MemorySegment.NULL : a.allocateFrom(tag);
      Native.check(Native.translate(tr, texts, n, tagz, params, out, err), err);
      try {
        List<String> result = new ArrayList<>(n);
        for (int i = 0; i < n; i++) result.add(Native.string(out.getAtIndex(ADDRESS, i)));
        return result;
      } finally {
        Native.stringsFree(out, n);
      }
    } finally {
      release();
    }
  }

  /**
   * Translates a text of any length, with its sentences: split into lines and sentences, a
   * sentence longer than the model's positions split again at word boundaries (never
   * truncated), and the translations joined back with the source's line breaks.
   *
   * @throws TolkException.NotFound when the target names no tag of the model
   */
  public Translation translateText(String text, GenerateOptions options) {
    Objects.requireNonNull(text, "text");
    Objects.requireNonNull(options, "options");
    byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
    MemorySegment tr = acquire();
    try (Arena a = Arena.ofConfined()) {
      String tag = resolveTarget(options.target());
      MemorySegment params = Native.generateDefaults(a, tr);
      options.applyTo(params);
      MemorySegment src = a.allocate(Math.max(1, utf8.length));
      MemorySegment.copy(utf8, 0, src, JAVA_BYTE, 0, utf8.length);
      MemorySegment out = a.allocate(Native.TT_SIZE, 8);
      MemorySegment err = Native.newError(a);
      MemorySegment tagz = tag == null ? MemorySegment.NULL : a.allocateFrom(tag);
      Native.check(Native.translateText(tr, src, utf8.length, tagz, params, out, err), err);
      try {
        return read(out, utf8);
      } finally {
        Native.textTranslationFree(out);
      }
    } finally {
      release();
    }
  }

  private static Translation read(MemorySegment t, byte[] utf8) {
    String text = Native.string(t.get(ADDRESS, Native.TT_TEXT));
    long n = t.get(JAVA_LONG, Native.TT_N);
    List<Translation.Sentence> sentences = new ArrayList<>();
    MemorySegment arr =
        n == 0 ? MemorySegment.NULL : t.get(ADDRESS, Native.TT_SENTENCES).reinterpret(n * Native.S_SIZE);
    for (long i = 0; i < n; i++) {
      MemorySegment s = arr.asSlice(i * Native.S_SIZE, Native.S_SIZE);
      int begin = (int) s.get(JAVA_LONG, Native.S_BEGIN);
      int end = (int) s.get(JAVA_LONG, Native.S_END);
      long nIds = s.get(JAVA_LONG, Native.S_N_IDS);
      int[] ids =
          nIds == 0
              ? new int[0]
              : s.get(ADDRESS, Native.S_IDS).reinterpret(4 * nIds).toArray(JAVA_INT);
      sentences.add(
          new Translation.Sentence(
              new String(Arrays.copyOfRange(utf8, begin, end), StandardCharsets.UTF_8),
              s.get(JAVA_LONG, Native.S_LINE),
              Native.string(s.get(ADDRESS, Native.S_TRANSLATION)),
              ids,
              s.get(JAVA_FLOAT, Native.S_SCORE)));
    }
    return new Translation(text, List.copyOf(sentences));
  }

  /** The tag for `target` as the CLI's --to picks it; null for a model without tags. */
  private String resolveTarget(String target) {
    String[] tags = tokenizer.languageTags();
    if (tags.length == 0) return null;
    String to = target == null ? "zh" : target;
    if (to.startsWith(">>")) {
      if (tokenizer.pieceToId(to) >= 0) return to;
    } else {
      for (String[] row : TARGETS) {
        if (!row[0].equals(to)) continue;
        for (int k = 1; k < row.length; k++) if (tokenizer.pieceToId(row[k]) >= 0) return row[k];
      }
    }
    throw TolkException.of(
        TolkException.Status.NOT_FOUND.code(),
        "the model has no tag for '" + to + "'; its tags: " + String.join(" ", tags));
  }

  @Override
  public String toString() {
    return isClosed() ? "Translator(closed)" : "Translator";
  }
}
