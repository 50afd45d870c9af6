package dev.tolk;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;

/**
 * Generation settings for {@link Translator}, as {@code tolk translate}'s options name them.
 * A setting left unset keeps the model's default (generation_config.json, then config.json);
 * {@link Translator#defaultOptions()} shows those.
 */
public final class GenerateOptions {
  private Integer beam;
  private Integer maxNewTokens;
  private Integer maxLength;
  private Float lengthPenalty;
  private Integer batchTokens;
  private String target;

  /** Nothing set: the model's defaults and the default target ("zh"). */
  public GenerateOptions() {}

  /** Beam width (num_beams); 1 is greedy. */
  public GenerateOptions beam(int beams) {
    if (beams < 1) throw new IllegalArgumentException("beam must be >= 1, not " + beams);
    this.beam = beams;
    return this;
  }

  /** Tokens generated at most per sentence (max_new_tokens; overrides maxLength). */
  public GenerateOptions maxNewTokens(int tokens) {
    if (tokens < 1) throw new IllegalArgumentException("maxNewTokens must be >= 1, not " + tokens);
    this.maxNewTokens = tokens;
    return this;
  }

  /** Length bound of a generated sequence, its start token included (max_length). */
  public GenerateOptions maxLength(int tokens) {
    if (tokens < 1) throw new IllegalArgumentException("maxLength must be >= 1, not " + tokens);
    this.maxLength = tokens;
    return this;
  }

  /** Beam search's length penalty (length_penalty). */
  public GenerateOptions lengthPenalty(float penalty) {
    this.lengthPenalty = penalty;
    return this;
  }

  /** Source tokens per encoder/decoder batch, padding included (0: one batch per text). */
  public GenerateOptions batchTokens(int tokens) {
    if (tokens < 0) throw new IllegalArgumentException("batchTokens must be >= 0, not " + tokens);
    this.batchTokens = tokens;
    return this;
  }

  /**
   * The target language as {@code tolk translate --to} takes it: "zh" (the default),
   * "zh-Hans", "zh-Hant", "zh-TW", "yue", "yue-Hans", "yue-Hant", or a tag of the model's
   * vocabulary such as ">>cmn_Hans<<". Ignored for models without target tags.
   */
  public GenerateOptions target(String target) {
    this.target = target;
    return this;
  }

  /** The beam width, or null when unset. */
  public Integer beam() {
    return beam;
  }

  /** max_new_tokens, or null when unset (0 in the model's defaults: maxLength applies). */
  public Integer maxNewTokens() {
    return maxNewTokens;
  }

  /** max_length, or null when unset. */
  public Integer maxLength() {
    return maxLength;
  }

  /** length_penalty, or null when unset. */
  public Float lengthPenalty() {
    return lengthPenalty;
  }

  /** batch_tokens, or null when unset. */
  public Integer batchTokens() {
    return batchTokens;
  }

  /** The target, or null for the default. */
  public String target() {
    return target;
  }

  /** The settings of a tolk_generate_params struct. */
  static GenerateOptions read(MemorySegment p) {
    GenerateOptions o = new GenerateOptions();
    o.beam = p.get(JAVA_INT, off("num_beams"));
    o.lengthPenalty = p.get(JAVA_FLOAT, off("length_penalty"));
    o.maxNewTokens = p.get(JAVA_INT, off("max_new_tokens"));
    o.maxLength = p.get(JAVA_INT, off("max_length"));
    o.batchTokens = p.get(JAVA_INT, off("batch_tokens"));
    return o;
  }

  /** Writes the settings that are set over a tolk_generate_params struct. */
  void applyTo(MemorySegment p) {
    if (beam != null) p.set(JAVA_INT, off("num_beams"), beam);
    if (lengthPenalty != null) p.set(JAVA_FLOAT, off("length_penalty"), lengthPenalty);
    if (maxNewTokens != null) p.set(JAVA_INT, off("max_new_tokens"), maxNewTokens);
    if (maxLength != null) p.set(JAVA_INT, off("max_length"), maxLength);
    if (batchTokens != null) p.set(JAVA_INT, off("batch_tokens"), batchTokens);
  }

  private static long off(String field) {
    return Native.GENERATE_PARAMS.byteOffset(
        java.lang.foreign.MemoryLayout.PathElement.groupElement(field));
  }
}
