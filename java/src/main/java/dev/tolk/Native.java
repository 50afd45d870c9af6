package dev.tolk;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;

/**
 * The C API of include/tolk.h as method handles, and the layouts of the structs that cross it.
 * Every offset below is the one the C compiler gives on x86-64 Linux (LP64); the tests check
 * the structs read back through them (the model's generation defaults, value infos, sentences).
 * Nothing here checks arguments: the public classes do, before calling in.
 */
final class Native {
  private Native() {}

  private static final Linker LINKER = Linker.nativeLinker();

  /** tolk_error: {tolk_status status; char message[1024]}. */
  static final long ERROR_SIZE = 4 + 1024;

  static final StructLayout SESSION_PARAMS =
      MemoryLayout.structLayout(
          JAVA_INT.withName("threads"),
          JAVA_INT.withName("opt_level"),
          JAVA_LONG.withName("memory_limit"),
          JAVA_INT.withName("plan_cache_size"),
          JAVA_INT.withName("kv_cache"),
          JAVA_INT.withName("quant_rows"),
          JAVA_INT.withName("int8_lm_head"),
          JAVA_INT.withName("plan_on_repeat"),
          JAVA_INT.withName("bf16_weights"),
          JAVA_INT.withName("kv_keys_transposed_only"),
          MemoryLayout.paddingLayout(4));

  static final StructLayout TRANSLATOR_PARAMS =
      MemoryLayout.structLayout(
          JAVA_INT.withName("threads"), JAVA_INT.withName("int8"), JAVA_INT.withName("verify"),
          JAVA_INT.withName("int8_lm_head"), JAVA_INT.withName("opt_level"),
          JAVA_INT.withName("bf16"), ADDRESS.withName("vmap"));

  static final StructLayout TOKENIZER_PARAMS =
      MemoryLayout.structLayout(JAVA_INT.withName("max_length"));

  /** tolk_generate_params, field by field as tolk.h declares them. */
  static final StructLayout GENERATE_PARAMS =
      MemoryLayout.structLayout(
          JAVA_INT.withName("num_beams"),
          JAVA_FLOAT.withName("length_penalty"),
          JAVA_INT.withName("early_stopping"),
          JAVA_INT.withName("max_new_tokens"),
          JAVA_INT.withName("max_length"),
          JAVA_INT.withName("min_length"),
          JAVA_INT.withName("min_new_tokens"),
          JAVA_FLOAT.withName("repetition_penalty"),
          JAVA_INT.withName("no_repeat_ngram_size"),
          JAVA_INT.withName("num_return_sequences"),
          JAVA_INT.withName("renormalize_logits"),
          JAVA_INT.withName("do_sample"),
          JAVA_FLOAT.withName("temperature"),
          JAVA_INT.withName("top_k"),
          JAVA_FLOAT.withName("top_p"),
          MemoryLayout.paddingLayout(4),
          JAVA_LONG.withName("seed"),
          JAVA_INT.withName("batch_tokens"),
          JAVA_INT.withName("output_scores"));

  static final StructLayout SPECIAL_IDS =
      MemoryLayout.structLayout(
          JAVA_INT.withName("eos"), JAVA_INT.withName("unk"), JAVA_INT.withName("pad"));

  /** tolk_value_info: name, dtype, rank, dims, dim_names. */
  static final long VI_NAME = 0, VI_DTYPE = 8, VI_RANK = 12, VI_DIMS = 16, VI_DIM_NAMES = 24;

  /** tolk_ids: {int32_t *ids; size_t n; size_t dropped}. */
  static final long IDS_SIZE = 24, IDS_PTR = 0, IDS_N = 8, IDS_DROPPED = 16;

  /** tolk_tokens: {char **tokens; size_t n}. */
  static final long TOKENS_SIZE = 16;

  /** tolk_text_translation and tolk_sentence. */
  static final long TT_SIZE = 48, TT_TEXT = 0, TT_SENTENCES = 8, TT_N = 16, TT_MS = 24;

  static final long S_SIZE = 56, S_BEGIN = 0, S_END = 8, S_LINE = 16, S_TRANSLATION = 24,
      S_IDS = 32, S_N_IDS = 40, S_SCORE = 48;

  private static MethodHandle fn(String name, FunctionDescriptor d) {
    MemorySegment sym =
        Library.lookup()
            .find(name)
            .orElseThrow(() -> new UnsatisfiedLinkError("libtolk has no symbol " + name));
    return LINKER.downcallHandle(sym, d);
  }

  private static FunctionDescriptor status(MemoryLayout... args) {
    return FunctionDescriptor.of(JAVA_INT, args);
  }

  private static final MethodHandle VERSION = fn("tolk_version", FunctionDescriptor.of(ADDRESS));

  // Tensors.
  private static final MethodHandle TENSOR_CREATE =
      fn(
          "tolk_tensor_create",
          status(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS));
  private static final MethodHandle TENSOR_FREE =
      fn("tolk_tensor_free", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle TENSOR_DTYPE =
      fn("tolk_tensor_dtype", FunctionDescriptor.of(JAVA_INT, ADDRESS));
  private static final MethodHandle TENSOR_RANK =
      fn("tolk_tensor_rank", FunctionDescriptor.of(JAVA_INT, ADDRESS));
  private static final MethodHandle TENSOR_DIMS =
      fn("tolk_tensor_dims", FunctionDescriptor.of(ADDRESS, ADDRESS));
  private static final MethodHandle TENSOR_NBYTES =
      fn("tolk_tensor_nbytes", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle TENSOR_DATA =
      fn("tolk_tensor_data", FunctionDescriptor.of(ADDRESS, ADDRESS));
  private static final MethodHandle TENSOR_LOAD_PB =
      fn("tolk_tensor_load_pb", status(ADDRESS, ADDRESS, ADDRESS));

  // Sessions.
  private static final MethodHandle SESSION_DEFAULTS =
      fn("tolk_session_default_params", FunctionDescriptor.of(SESSION_PARAMS));
  private static final MethodHandle SESSION_CREATE_FROM_FILE =
      fn("tolk_session_create_from_file", status(ADDRESS, SESSION_PARAMS, ADDRESS, ADDRESS));
  private static final MethodHandle SESSION_FREE =
      fn("tolk_session_free", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle SESSION_INPUT_COUNT =
      fn("tolk_session_input_count", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle SESSION_OUTPUT_COUNT =
      fn("tolk_session_output_count", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle SESSION_INPUT =
      fn("tolk_session_input", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG));
  private static final MethodHandle SESSION_OUTPUT =
      fn("tolk_session_output", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG));
  private static final MethodHandle SESSION_RUN =
      fn(
          "tolk_session_run",
          status(
              ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS,
              ADDRESS));

  // Translators.
  private static final MethodHandle TRANSLATOR_DEFAULTS =
      fn("tolk_translator_default_params", FunctionDescriptor.of(TRANSLATOR_PARAMS));
  private static final MethodHandle TRANSLATOR_CREATE =
      fn("tolk_translator_create", status(ADDRESS, TRANSLATOR_PARAMS, ADDRESS, ADDRESS));
  private static final MethodHandle TRANSLATOR_FREE =
      fn("tolk_translator_free", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle GENERATE_DEFAULTS =
      fn("tolk_generate_default_params", FunctionDescriptor.of(GENERATE_PARAMS, ADDRESS));
  private static final MethodHandle TRANSLATOR_TOKENIZER =
      fn("tolk_translator_tokenizer", FunctionDescriptor.of(ADDRESS, ADDRESS));
  private static final MethodHandle TRANSLATE_TEXT =
      fn(
          "tolk_translator_translate_text",
          status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle TRANSLATE =
      fn(
          "tolk_translator_translate",
          status(ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle TEXT_TRANSLATION_FREE =
      fn("tolk_text_translation_free", FunctionDescriptor.ofVoid(ADDRESS));

  // Tokenizers.
  private static final MethodHandle TOKENIZER_DEFAULTS =
      fn("tolk_tokenizer_default_params", FunctionDescriptor.of(TOKENIZER_PARAMS));
  private static final MethodHandle TOKENIZER_CREATE =
      fn("tolk_tokenizer_create", status(ADDRESS, TOKENIZER_PARAMS, ADDRESS, ADDRESS));
  private static final MethodHandle TOKENIZER_FREE =
      fn("tolk_tokenizer_free", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle VOCAB_SIZE =
      fn("tolk_tokenizer_vocab_size", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
  private static final MethodHandle ID_TO_PIECE =
      fn("tolk_tokenizer_id_to_piece", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
  private static final MethodHandle PIECE_TO_ID =
      fn("tolk_tokenizer_piece_to_id", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle LANGUAGE_TAGS =
      fn("tolk_tokenizer_language_tags", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
  private static final MethodHandle ENCODE_BATCH =
      fn(
          "tolk_tokenizer_encode_batch",
          status(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle IDS_FREE =
      fn("tolk_ids_free", FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG));
  private static final MethodHandle DECODE_BATCH =
      fn(
          "tolk_tokenizer_decode_batch",
          status(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle STRINGS_FREE =
      fn("tolk_strings_free", FunctionDescriptor.ofVoid(ADDRESS, JAVA_LONG));
  private static final MethodHandle TOKENIZE =
      fn("tolk_tokenizer_tokenize", status(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
  private static final MethodHandle TOKENS_FREE =
      fn("tolk_tokens_free", FunctionDescriptor.ofVoid(ADDRESS));
  private static final MethodHandle SPECIAL =
      fn("tolk_tokenizer_special_ids", FunctionDescriptor.of(SPECIAL_IDS, ADDRESS));

  /** A downcall failed in a way the C API excludes: a bug here, not the caller's. */
  private static AssertionError broken(Throwable t) {
    return new AssertionError("libtolk downcall failed", t);
  }

  /** Throws the library's error when status is not TOLK_OK. */
  static void check(int status, MemorySegment err) {
    if (status != 0) throw TolkException.of(status, err.getString(4));
  }

  static MemorySegment newError(Arena a) {
    return a.allocate(ERROR_SIZE, 8);
  }

  /** The NUL-terminated UTF-8 string at p, or null for NULL. */
  static String string(MemorySegment p) {
    return p.equals(MemorySegment.NULL) ? null : p.reinterpret(Long.MAX_VALUE).getString(0);
  }

  static String version() {
    try {
      return string((MemorySegment) VERSION.invokeExact());
    } catch (Throwable t) {
      throw broken(t);
    }
  }

  // ---------------------------------------------------------------- tensors

  static int tensorCreate(
      int dtype, int rank, MemorySegment dims, MemorySegment data, long nbytes, MemorySegment out,
      MemorySegment err) {
    try {
      return (int) TENSOR_CREATE.invokeExact(dtype, rank, dims, data, nbytes, out, err);
    } catch (Throwable t) {
      throw broken(t);
    }
  }

  static void tensorFree(MemorySegment t) {
    try {
      TENSOR_FREE.invokeExact(t);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int tensorDtype(MemorySegment t) {
    try {
      return (int) TENSOR_DTYPE.invokeExact(t);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static long[] tensorShape(MemorySegment t) {
    try {
      int rank = (int) TENSOR_RANK.invokeExact(t);
      MemorySegment dims = (MemorySegment) TENSOR_DIMS.invokeExact(t);
      return rank == 0 ? new long[0] : dims.reinterpret(8L * rank).toArray(JAVA_LONG);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  /** The tensor's element bytes, as a segment valid while the tensor is. */
  static MemorySegment tensorBytes(MemorySegment t) {
    try {
      long n = (long) TENSOR_NBYTES.invokeExact(t);
      MemorySegment d = (MemorySegment) TENSOR_DATA.invokeExact(t);
      return n == 0 ? MemorySegment.NULL : d.reinterpret(n);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int tensorLoadPb(MemorySegment path, MemorySegment out, MemorySegment err) {
    try {
      return (int) TENSOR_LOAD_PB.invokeExact(path, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  // ---------------------------------------------------------------- sessions

  static MemorySegment sessionDefaults(SegmentAllocator a) {
    try {
      return (MemorySegment) SESSION_DEFAULTS.invokeExact(a);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int sessionCreateFromFile(
      MemorySegment path, MemorySegment params, MemorySegment out, MemorySegment err) {
    try {
      return (int) SESSION_CREATE_FROM_FILE.invokeExact(path, params, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void sessionFree(MemorySegment s) {
    try {
      SESSION_FREE.invokeExact(s);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static long sessionCount(MemorySegment s, boolean inputs) {
    try {
      return inputs
          ? (long) SESSION_INPUT_COUNT.invokeExact(s)
          : (long) SESSION_OUTPUT_COUNT.invokeExact(s);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  /** The tolk_value_info of input or output i, as a 32-byte segment. */
  static MemorySegment sessionValue(MemorySegment s, boolean input, long i) {
    try {
      MemorySegment p =
          input
              ? (MemorySegment) SESSION_INPUT.invokeExact(s, i)
              : (MemorySegment) SESSION_OUTPUT.invokeExact(s, i);
      return p.reinterpret(32);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int sessionRun(
      MemorySegment s, long nIn, MemorySegment inNames, MemorySegment inputs, long nOut,
      MemorySegment outNames, MemorySegment outputs, MemorySegment err) {
    try {
      return (int)
          SESSION_RUN.invokeExact(
              s, nIn, inNames, inputs, nOut, outNames, outputs, MemorySegment.NULL, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  // ---------------------------------------------------------------- translators

  static MemorySegment translatorDefaults(SegmentAllocator a) {
    try {
      return (MemorySegment) TRANSLATOR_DEFAULTS.invokeExact(a);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int translatorCreate(
      MemorySegment dir, MemorySegment params, MemorySegment out, MemorySegment err) {
    try {
      return (int) TRANSLATOR_CREATE.invokeExact(dir, params, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void translatorFree(MemorySegment tr) {
    try {
      TRANSLATOR_FREE.invokeExact(tr);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static MemorySegment generateDefaults(SegmentAllocator a, MemorySegment tr) {
    try {
      return (MemorySegment) GENERATE_DEFAULTS.invokeExact(a, tr);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static MemorySegment translatorTokenizer(MemorySegment tr) {
    try {
      return (MemorySegment) TRANSLATOR_TOKENIZER.invokeExact(tr);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int translateText(
      MemorySegment tr, MemorySegment text, long len, MemorySegment tag, MemorySegment params,
      MemorySegment out, MemorySegment err) {
    try {
      return (int) TRANSLATE_TEXT.invokeExact(tr, text, len, tag, params, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int translate(
      MemorySegment tr, MemorySegment texts, long n, MemorySegment tag, MemorySegment params,
      MemorySegment out, MemorySegment err) {
    try {
      return (int) TRANSLATE.invokeExact(tr, texts, n, tag, params, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void textTranslationFree(MemorySegment t) {
    try {
      TEXT_TRANSLATION_FREE.invokeExact(t);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  // ---------------------------------------------------------------- tokenizers

  static MemorySegment tokenizerDefaults(SegmentAllocator a) {
    try {
      return (MemorySegment) TOKENIZER_DEFAULTS.invokeExact(a);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int tokenizerCreate(
      MemorySegment dir, MemorySegment params, MemorySegment out, MemorySegment err) {
    try {
      return (int) TOKENIZER_CREATE.invokeExact(dir, params, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void tokenizerFree(MemorySegment t) {
    try {
      TOKENIZER_FREE.invokeExact(t);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static long vocabSize(MemorySegment t) {
    try {
      return (long) VOCAB_SIZE.invokeExact(t);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static String idToPiece(MemorySegment t, int id) {
    try {
      return string((MemorySegment) ID_TO_PIECE.invokeExact(t, id));
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int pieceToId(MemorySegment t, MemorySegment piece) {
    try {
      return (int) PIECE_TO_ID.invokeExact(t, piece);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static String[] languageTags(MemorySegment t) {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment n = a.allocate(JAVA_LONG);
      MemorySegment tags = (MemorySegment) LANGUAGE_TAGS.invokeExact(t, n);
      long count = n.get(JAVA_LONG, 0);
      String[] out = new String[(int) count];
      MemorySegment arr = count == 0 ? tags : tags.reinterpret(8 * count);
      for (int i = 0; i < count; i++) out[i] = string(arr.getAtIndex(ADDRESS, i));
      return out;
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int[] specialIds(MemorySegment t) {
    try (Arena a = Arena.ofConfined()) {
      MemorySegment s = (MemorySegment) SPECIAL.invokeExact((SegmentAllocator) a, t);
      return s.toArray(JAVA_INT);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  // Results below follow tolk.h's one freeing rule: they are written into memory the caller
  // provides (`out`), and the matching free releases what the entries point to, never `out`.

  static int encodeBatch(
      MemorySegment tok, MemorySegment texts, MemorySegment lens, long n, int flags,
      MemorySegment out, MemorySegment err) {
    try {
      return (int) ENCODE_BATCH.invokeExact(tok, texts, lens, n, flags, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void idsFree(MemorySegment ids, long n) {
    try {
      IDS_FREE.invokeExact(ids, n);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int decodeBatch(
      MemorySegment tok, MemorySegment in, long n, int flags, MemorySegment out,
      MemorySegment err) {
    try {
      return (int) DECODE_BATCH.invokeExact(tok, in, n, flags, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void stringsFree(MemorySegment strings, long n) {
    try {
      STRINGS_FREE.invokeExact(strings, n);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static int tokenize(
      MemorySegment tok, MemorySegment text, long len, int flags, MemorySegment out,
      MemorySegment err) {
    try {
      return (int) TOKENIZE.invokeExact(tok, text, len, flags, out, err);
    } catch (Throwable e) {
      throw broken(e);
    }
  }

  static void tokensFree(MemorySegment tokens) {
    try {
      TOKENS_FREE.invokeExact(tokens);
    } catch (Throwable e) {
      throw broken(e);
    }
  }
}
