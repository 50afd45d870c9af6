package dev.tolk;

import java.nio.file.Path;

/**
 * Entry points of tolk for Java: translators, ONNX sessions and tokenizers over libtolk, which
 * is found as {@link #version()} says (the system property {@code tolk.library.path}, the
 * environment variable {@code TOLK_LIBRARY}, else {@code System.loadLibrary("tolk")}).
 *
 * <pre>{@code
 * try (Translator tr = Tolk.translator(Path.of("models/demo-en-zh"))) {
 *   List<String> zh = tr.translate(List.of("Open the file.", "Save it."));
 * }
 * }</pre>
 *
 * <p>Every object holding native memory is AutoCloseable; a failed call throws a {@link
 * TolkException} carrying libtolk's status and message.
 */
public final class Tolk {
  private Tolk() {}

  /**
   * The library's version ("0.1.0").
   *
   * @throws UnsatisfiedLinkError when libtolk cannot be found or loaded, naming where it looked
   */
  public static String version() {
    Library.lookup();
    return Native.version();
  }

  /** Loads a translation model folder with the default options. */
  public static Translator translator(Path modelDir) {
    return Translator.create(modelDir, new Translator.Options());
  }

  /** Loads a translation model folder: {@code new Translator.Options().int8(true).threads(2)}. */
  public static Translator translator(Path modelDir, Translator.Options options) {
    return Translator.create(modelDir, options);
  }

  /** Loads an ONNX model and prepares it to run. */
  public static InferenceSession session(Path model) {
    return InferenceSession.create(model);
  }

  /** Loads an ONNX model with `options` and prepares it to run. */
  public static InferenceSession session(Path model, InferenceSession.Options options) {
    return InferenceSession.create(model, options);
  }

  /** Loads the tokenizer files of a model folder. */
  public static Tokenizer tokenizer(Path modelDir) {
    return Tokenizer.create(modelDir);
  }
}
