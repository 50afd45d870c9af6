package dev.tolk;

import java.util.List;

/**
 * The translation of one text by {@link Translator#translateText}: the whole translation, line
 * breaks as in the source, and each sentence it was split into.
 *
 * @param text the translation
 * @param sentences the source's sentences in order, each with its translation
 */
public record Translation(String text, List<Sentence> sentences) {
  /**
   * One sentence of a translated text.
   *
   * @param source the sentence as it stands in the source text
   * @param line the 0-based line of the text it is on
   * @param translation its translation
   * @param ids the generated token ids, decoder start token first
   * @param score the sequence score (beam: length penalty applied; greedy: the sum of the
   *     tokens' log-probabilities)
   */
  public record Sentence(String source, long line, String translation, int[] ids, float score) {}
}
