package dev.tolk;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * An ONNX model prepared to run (a {@code tolk_session}), shaped like ONNX Runtime's {@code
 * OrtSession}: {@link #run(Map)} takes tensors by input name and gives a {@link Result} of named
 * output tensors.
 *
 * <p>Runs may come from several threads at once: each takes its own execution state inside
 * libtolk. {@link #close()} waits for the runs in flight; runs after it throw
 * IllegalStateException.
 */
public final class InferenceSession extends Handle {
  /** How much of the graph optimisation to apply (tolk_opt_level). */
  public enum OptLevel {
    /** Run the graph as written. */
    NONE,
    /** Fold nodes fed only by constants. */
    BASIC,
    /** Folding and fusions. */
    ALL
  }

  /** Session settings; the defaults are libtolk's. */
  public static final class Options {
    private int threads;
    private OptLevel optLevel;
    private long memoryLimit;
    private int planCacheSize;

    /** Intra-op threads, the caller's included; 0 (the default): the machine's cores. */
    public Options threads(int threads) {
      this.threads = threads;
      return this;
    }

    /** libtolk's default (BASIC) unless set. */
    public Options optLevel(OptLevel level) {
      this.optLevel = Objects.requireNonNull(level);
      return this;
    }

    /** Bound on the intermediate memory of one run in bytes (0: none): TolkException.Limit. */
    public Options memoryLimit(long bytes) {
      this.memoryLimit = bytes;
      return this;
    }

    /** Execution plans kept, one per input-shape signature (0: libtolk's default). */
    public Options planCacheSize(int plans) {
      this.planCacheSize = plans;
      return this;
    }
  }

  private final Map<String, TensorInfo> inputs;
  private final Map<String, TensorInfo> outputs;

  private InferenceSession(MemorySegment ptr) {
    super(ptr, "session", null);
    this.inputs = values(ptr, true);
    this.outputs = values(ptr, false);
  }

  @Override
  void free(MemorySegment p) {
    Native.sessionFree(p);
  }

  /** Loads the model at `path` with the default options. */
  public static InferenceSession create(Path path) {
    return create(path, new Options());
  }

  /**
   * Loads the model at `path` (external data resolved beside it) and prepares it.
   *
   * @throws TolkException.Io or NotFound when the file cannot be read, Malformed / InvalidModel
   *     for a broken file, Unsupported for an operator tolk lacks (naming the node)
   */
  public static InferenceSession create(Path path, Options options) {
    Library.lookup();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment params = Native.sessionDefaults(a);
      params.set(JAVA_INT, 0, options.threads);
      if (options.optLevel != null) params.set(JAVA_INT, 4, options.optLevel.ordinal());
      params.set(JAVA_LONG, 8, options.memoryLimit);
      if (options.planCacheSize > 0) params.set(JAVA_INT, 16, options.planCacheSize);
      MemorySegment out = a.allocate(ADDRESS);
      MemorySegment err = Native.newError(a);
      int st = Native.sessionCreateFromFile(a.allocateFrom(path.toString()), params, out, err);
      Native.check(st, err);
      return new InferenceSession(out.get(ADDRESS, 0));
    }
  }

  private static Map<String, TensorInfo> values(MemorySegment s, boolean input) {
    Map<String, TensorInfo> m = new LinkedHashMap<>();
    long n = Native.sessionCount(s, input);
    for (long i = 0; i < n; i++) {
      MemorySegment v = Native.sessionValue(s, input, i);
      String name = Native.string(v.get(ADDRESS, Native.VI_NAME));
      int rank = v.get(JAVA_INT, Native.VI_RANK);
      long[] dims = new long[Math.max(0, rank)];
      List<String> symbols = new ArrayList<>();
      if (rank > 0) {
        dims = v.get(ADDRESS, Native.VI_DIMS).reinterpret(8L * rank).toArray(JAVA_LONG);
        MemorySegment names = v.get(ADDRESS, Native.VI_DIM_NAMES).reinterpret(8L * rank);
        for (int k = 0; k < rank; k++) symbols.add(Native.string(names.getAtIndex(ADDRESS, k)));
      }
      DataType type = DataType.of(v.get(JAVA_INT, Native.VI_DTYPE));
      m.put(name, new TensorInfo(type, rank, dims, Collections.unmodifiableList(symbols)));
    }
    return Collections.unmodifiableMap(m);
  }

  /** The inputs a caller supplies, in declared order. */
  public Set<String> getInputNames() {
    return getInputInfo().keySet();
  }

  /** The outputs, in declared order. */
  public Set<String> getOutputNames() {
    return getOutputInfo().keySet();
  }

  /** Declared type and shape of each input. */
  public Map<String, TensorInfo> getInputInfo() {
    acquire();
    release();
    return inputs;
  }

  /** Declared type and shape of each output. */
  public Map<String, TensorInfo> getOutputInfo() {
    acquire();
    release();
    return outputs;
  }

  /** Runs the model for all its outputs. */
  public Result run(Map<String, Tensor> feeds) {
    return run(feeds, outputs.keySet());
  }

  /**
   * Runs the model. Every input without an initializer must be given, with its declared type
   * and a shape matching the declared one; `requested` selects outputs (or intermediate values
   * of the main graph, by name), returned in that order.
   *
   * @throws TolkException.NotFound for an unknown input or output name, Type / Shape for a
   *     tensor that does not match its declared input, InvalidArgument for a missing input
   * @throws IllegalStateException when the session or one of the tensors is closed
   */
  public Result run(Map<String, Tensor> feeds, Set<String> requested) {
    Objects.requireNonNull(feeds, "feeds");
    Objects.requireNonNull(requested, "requested");
    List<String> outNames = new ArrayList<>(requested);
    MemorySegment s = acquire();
    Map<Tensor, MemorySegment> held = new IdentityHashMap<>();
    try (Arena a = Arena.ofConfined()) {
      int n = feeds.size();
      MemorySegment names = a.allocate(ADDRESS, Math.max(1, n));
      MemorySegment values = a.allocate(ADDRESS, Math.max(1, n));
      int i = 0;
      for (Map.Entry<String, Tensor> e : feeds.entrySet()) {
        Tensor t = Objects.requireNonNull(e.getValue(), "tensor for input " + e.getKey());
        MemorySegment p = held.get(t);
        if (p == null) {
          p = t.pointer();
          held.put(t, p);
        }
        names.setAtIndex(ADDRESS, i, a.allocateFrom(e.getKey()));
        values.setAtIndex(ADDRESS, i, p);
        i++;
      }
      int m = outNames.size();
      MemorySegment onames = a.allocate(ADDRESS, Math.max(1, m));
      for (int k = 0; k < m; k++) onames.setAtIndex(ADDRESS, k, a.allocateFrom(outNames.get(k)));
      MemorySegment outs = a.allocate(ADDRESS, Math.max(1, m));
      MemorySegment err = Native.newError(a);
      Native.check(Native.sessionRun(s, n, names, values, m, onames, outs, err), err);
      Tensor[] results = new Tensor[m];
      for (int k = 0; k < m; k++) results[k] = new Tensor(outs.getAtIndex(ADDRESS, k));
      return new Result(outNames, Arrays.asList(results));
    } finally {
      for (Tensor t : held.keySet()) t.release();
      release();
    }
  }

  @Override
  public String toString() {
    return isClosed() ? "InferenceSession(closed)" : "InferenceSession(" + inputs + " -> " + outputs + ")";
  }

  /**
   * The outputs of one run, in the order asked for, shaped like ONNX Runtime's {@code
   * OrtSession.Result}. Closing it closes every tensor in it.
   */
  public static final class Result implements AutoCloseable, Iterable<Map.Entry<String, Tensor>> {
    private final List<String> names;
    private final List<Tensor> tensors;
    private final Map<String, Tensor> byName = new LinkedHashMap<>();

    Result(List<String> names, List<Tensor> tensors) {
      this.names = List.copyOf(names);
      this.tensors = List.copyOf(tensors);
      for (int i = 0; i < names.size(); i++) byName.put(names.get(i), tensors.get(i));
    }

    /** Outputs in the result. */
    public int size() {
      return tensors.size();
    }

    /** Output i, in the order asked for. */
    public Tensor get(int i) {
      return tensors.get(i);
    }

    /** The output named `name`, if the run produced it. */
    public Optional<Tensor> get(String name) {
      return Optional.ofNullable(byName.get(name));
    }

    /** The output names, in order. */
    public List<String> names() {
      return names;
    }

    @Override
    public Iterator<Map.Entry<String, Tensor>> iterator() {
      return Collections.unmodifiableMap(byName).entrySet().iterator();
    }

    @Override
    public void close() {
      for (Tensor t : tensors) t.close();
    }
  }
}
