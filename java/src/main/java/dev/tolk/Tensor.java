package dev.tolk;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Array;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A dense, row-major tensor held by libtolk (a {@code tolk_tensor}), shaped like ONNX Runtime's
 * {@code OnnxTensor}: {@link #createTensor(Object)} from Java arrays of any rank or from
 * buffers, {@link #getInfo()}, {@link #getValue()} and the {@code get*Buffer} copies.
 *
 * <p>The data is copied in and out: a tensor never aliases Java memory, so the arrays and
 * buffers it was made from may change afterwards. Java types map to element types as float →
 * FLOAT, double → DOUBLE, long → INT64, int → INT32, short → INT16, byte → INT8 and boolean →
 * BOOL; read back, the unsigned types come as the signed Java type of their width and FLOAT16 /
 * BFLOAT16 as their raw bits in shorts.
 *
 * <p>Close it when done (try-with-resources); using it afterwards throws
 * IllegalStateException. A tensor may be read from several threads at once.
 */
public final class Tensor extends Handle {
  private final TensorInfo info;

  Tensor(MemorySegment ptr) {
    super(ptr, "tensor", null);
    int dtype = Native.tensorDtype(ptr);
    long[] shape = Native.tensorShape(ptr);
    this.info = new TensorInfo(DataType.of(dtype), shape.length, shape, List.of());
  }

  @Override
  void free(MemorySegment p) {
    Native.tensorFree(p);
  }

  // ------------------------------------------------------------------ creating

  /**
   * A tensor from a Java array of any rank — {@code float[][]}, {@code long[]}, {@code
   * int[][][]}, … (rectangular) — or from a boxed scalar (a rank-0 tensor).
   *
   * @throws IllegalArgumentException for a ragged array or an element type with no tensor type
   */
  public static Tensor createTensor(Object data) {
    Objects.requireNonNull(data, "data");
    if (!data.getClass().isArray()) return scalar(data);
    List<Long> dims = new ArrayList<>();
    Class<?> c = data.getClass();
    Object first = data;
    while (c.isArray()) {
      int len = first == null ? 0 : Array.getLength(first);
      dims.add((long) len);
      c = c.getComponentType();
      first = len > 0 && c.isArray() ? Array.get(first, 0) : null;
    }
    DataType type = typeOf(c);
    long[] shape = dims.stream().mapToLong(Long::longValue).toArray();
    ByteBuffer bytes = allocate(numel(shape) * type.size());
    flatten(data, shape, 0, bytes);
    return create(type, shape, bytes.flip());
  }

  /** A FLOAT tensor of `shape` from the data's remaining elements. */
  public static Tensor createTensor(FloatBuffer data, long[] shape) {
    ByteBuffer b = allocate(4L * data.remaining());
    b.asFloatBuffer().put(data.duplicate());
    return create(DataType.FLOAT, shape, b);
  }

  /** An INT64 tensor of `shape` from the data's remaining elements. */
  public static Tensor createTensor(LongBuffer data, long[] shape) {
    ByteBuffer b = allocate(8L * data.remaining());
    b.asLongBuffer().put(data.duplicate());
    return create(DataType.INT64, shape, b);
  }

  /** An INT32 tensor of `shape` from the data's remaining elements. */
  public static Tensor createTensor(IntBuffer data, long[] shape) {
    ByteBuffer b = allocate(4L * data.remaining());
    b.asIntBuffer().put(data.duplicate());
    return create(DataType.INT32, shape, b);
  }

  /** A DOUBLE tensor of `shape` from the data's remaining elements. */
  public static Tensor createTensor(DoubleBuffer data, long[] shape) {
    ByteBuffer b = allocate(8L * data.remaining());
    b.asDoubleBuffer().put(data.duplicate());
    return create(DataType.DOUBLE, shape, b);
  }

  /** A FLOAT tensor of `shape` holding `data`. */
  public static Tensor createTensor(float[] data, long[] shape) {
    return createTensor(FloatBuffer.wrap(data), shape);
  }

  /** An INT64 tensor of `shape` holding `data`. */
  public static Tensor createTensor(long[] data, long[] shape) {
    return createTensor(LongBuffer.wrap(data), shape);
  }

  /** An INT32 tensor of `shape` holding `data`. */
  public static Tensor createTensor(int[] data, long[] shape) {
    return createTensor(IntBuffer.wrap(data), shape);
  }

  /**
   * A tensor of any element type from raw bytes: the buffer's remaining bytes, in its byte
   * order for multi-byte types (native order is what tolk keeps).
   *
   * @throws TolkException.InvalidArgument when the bytes do not fill the shape exactly
   */
  public static Tensor createTensor(ByteBuffer data, long[] shape, DataType type) {
    ByteBuffer b = allocate(data.remaining());
    ByteBuffer src = data.duplicate();
    if (type.size() > 1 && src.order() != ByteOrder.nativeOrder()) {
      swapInto(src, b, type.size());
    } else {
      b.put(src);
    }
    return create(type, shape, b.flip());
  }

  /**
   * Reads a file holding one serialized ONNX TensorProto, as the ONNX test data stores inputs
   * and outputs ({@code test_data_set_0/input_0.pb}).
   *
   * @throws TolkException.Io when it cannot be read, {@link TolkException.Malformed} when it is
   *     not a TensorProto
   */
  public static Tensor load(Path path) {
    Library.lookup();
    try (Arena a = Arena.ofConfined()) {
      MemorySegment out = a.allocate(ADDRESS);
      MemorySegment err = Native.newError(a);
      Native.check(Native.tensorLoadPb(a.allocateFrom(path.toString()), out, err), err);
      return new Tensor(out.get(ADDRESS, 0));
    }
  }

  private static Tensor create(DataType type, long[] shape, ByteBuffer bytes) {
    Library.lookup();
    Objects.requireNonNull(shape, "shape");
    if (type.size() == 0) throw new IllegalArgumentException("no tensor can hold " + type);
    try (Arena a = Arena.ofConfined()) {
      MemorySegment dims = a.allocate(JAVA_LONG, Math.max(1, shape.length));
      MemorySegment.copy(shape, 0, dims, JAVA_LONG, 0, shape.length);
      long n = bytes.remaining();
      MemorySegment data = a.allocate(Math.max(1, n), 8);
      MemorySegment.copy(MemorySegment.ofBuffer(bytes), 0, data, 0, n);
      MemorySegment out = a.allocate(ADDRESS);
      MemorySegment err = Native.newError(a);
      int st = Native.tensorCreate(type.code(), shape.length, dims, data, n, out, err);
      Native.check(st, err);
      return new Tensor(out.get(ADDRESS, 0));
    }
  }

  private static Tensor scalar(Object v) {
    Class<?> c = switch (v) {
      case Float f -> float.class;
      case Double d -> double.class;
      case Long l -> long.class;
      case Integer i -> int.class;
      case Short s -> short.class;
      case Byte b -> byte.class;
      case Boolean b -> boolean.class;
      default -> throw new IllegalArgumentException("no tensor type for " + v.getClass().getName());
    };
    Object arr = Array.newInstance(c, 1);
    Array.set(arr, 0, v);
    DataType type = typeOf(c);
    ByteBuffer b = allocate(type.size());
    flatten(arr, new long[] {1}, 0, b);
    return create(type, new long[0], b.flip());
  }

  private static DataType typeOf(Class<?> c) {
    if (c == float.class) return DataType.FLOAT;
    if (c == double.class) return DataType.DOUBLE;
    if (c == long.class) return DataType.INT64;
    if (c == int.class) return DataType.INT32;
    if (c == short.class) return DataType.INT16;
    if (c == byte.class) return DataType.INT8;
    if (c == boolean.class) return DataType.BOOL;
    throw new IllegalArgumentException("no tensor type for arrays of " + c.getName());
  }

  private static long numel(long[] shape) {
    long n = 1;
    for (long d : shape) n = Math.multiplyExact(n, d);
    return n;
  }

  private static ByteBuffer allocate(long n) {
    if (n > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("tensor of " + n + " bytes");
    return ByteBuffer.allocate((int) n).order(ByteOrder.nativeOrder());
  }

  private static void flatten(Object arr, long[] shape, int depth, ByteBuffer out) {
    int len = Array.getLength(arr);
    if (len != shape[depth]) {
      throw new IllegalArgumentException(
          "ragged array: dim " + depth + " has lengths " + shape[depth] + " and " + len);
    }
    if (depth < shape.length - 1) {
      for (int i = 0; i < len; i++) flatten(Array.get(arr, i), shape, depth + 1, out);
      return;
    }
    switch (arr) {
      case float[] f -> out.asFloatBuffer().put(f);
      case double[] d -> out.asDoubleBuffer().put(d);
      case long[] l -> out.asLongBuffer().put(l);
      case int[] i -> out.asIntBuffer().put(i);
      case short[] s -> out.asShortBuffer().put(s);
      case byte[] b -> out.duplicate().put(b);
      case boolean[] z -> {
        for (int i = 0; i < z.length; i++) out.put(out.position() + i, (byte) (z[i] ? 1 : 0));
      }
      default -> throw new IllegalArgumentException("not a primitive array: " + arr.getClass());
    }
    out.position(out.position() + len * typeOf(arr.getClass().getComponentType()).size());
  }

  private static void swapInto(ByteBuffer src, ByteBuffer dst, int size) {
    while (src.remaining() >= size) {
      for (int k = size - 1; k >= 0; k--) dst.put(src.get(src.position() + k));
      src.position(src.position() + size);
    }
    dst.put(src);
  }

  // ------------------------------------------------------------------ reading

  /** The element type and shape. */
  public TensorInfo getInfo() {
    acquire();
    release();
    return info;
  }

  /** The element type. */
  public DataType getType() {
    return getInfo().type;
  }

  /** A copy of the shape. */
  public long[] getShape() {
    return getInfo().getShape();
  }

  /** A copy of the elements as bytes in native order. */
  public ByteBuffer getByteBuffer() {
    MemorySegment p = acquire();
    try {
      MemorySegment d = Native.tensorBytes(p);
      ByteBuffer b = allocate(d.byteSize());
      if (d.byteSize() > 0) MemorySegment.ofBuffer(b).copyFrom(d);
      return b;
    } finally {
      release();
    }
  }

  /** A copy of the elements of a FLOAT tensor. */
  public FloatBuffer getFloatBuffer() {
    return typed(DataType.FLOAT).asFloatBuffer();
  }

  /** A copy of the elements of a DOUBLE tensor. */
  public DoubleBuffer getDoubleBuffer() {
    return typed(DataType.DOUBLE).asDoubleBuffer();
  }

  /** A copy of the elements of an INT64 tensor. */
  public LongBuffer getLongBuffer() {
    return typed(DataType.INT64).asLongBuffer();
  }

  /** A copy of the elements of an INT32 tensor. */
  public IntBuffer getIntBuffer() {
    return typed(DataType.INT32).asIntBuffer();
  }

  /** A copy of the elements of an INT16, UINT16, FLOAT16 or BFLOAT16 tensor (raw bits). */
  public ShortBuffer getShortBuffer() {
    if (info.type.size() != 2) throw wrongType("a 16-bit type");
    return getByteBuffer().asShortBuffer();
  }

  private ByteBuffer typed(DataType want) {
    if (info.type != want) throw wrongType(want.toString());
    return getByteBuffer();
  }

  private IllegalStateException wrongType(String want) {
    return new IllegalStateException("the tensor holds " + info.type + ", not " + want);
  }

  /**
   * The elements as a Java array of the tensor's rank ({@code float[][]} for a 2-D FLOAT
   * tensor), or a boxed value for a rank-0 tensor.
   *
   * @throws IllegalStateException when the tensor is closed, or too big for Java arrays
   */
  public Object getValue() {
    ByteBuffer b = getByteBuffer();
    long[] shape = info.getShape();
    Class<?> c = javaType(info.type);
    if (shape.length == 0) {
      Object one = Array.newInstance(c, 1);
      fill(one, b);
      return Array.get(one, 0);
    }
    int[] dims = new int[shape.length];
    for (int i = 0; i < dims.length; i++) {
      if (shape[i] > Integer.MAX_VALUE) throw new IllegalStateException("dim " + i + " too big");
      dims[i] = (int) shape[i];
    }
    Object arr = Array.newInstance(c, dims);
    unflatten(arr, dims.length, b);
    return arr;
  }

  private static Class<?> javaType(DataType t) {
    return switch (t) {
      case FLOAT -> float.class;
      case DOUBLE -> double.class;
      case INT64, UINT64 -> long.class;
      case INT32, UINT32 -> int.class;
      case INT16, UINT16, FLOAT16, BFLOAT16 -> short.class;
      case INT8, UINT8 -> byte.class;
      case BOOL -> boolean.class;
      default -> throw new IllegalStateException("no Java type for " + t);
    };
  }

  private static void unflatten(Object arr, int rank, ByteBuffer b) {
    if (rank > 1) {
      for (int i = 0; i < Array.getLength(arr); i++) unflatten(Array.get(arr, i), rank - 1, b);
    } else {
      fill(arr, b);
    }
  }

  private static void fill(Object arr, ByteBuffer b) {
    int n = Array.getLength(arr);
    switch (arr) {
      case float[] f -> b.asFloatBuffer().get(f);
      case double[] d -> b.asDoubleBuffer().get(d);
      case long[] l -> b.asLongBuffer().get(l);
      case int[] i -> b.asIntBuffer().get(i);
      case short[] s -> b.asShortBuffer().get(s);
      case byte[] y -> b.duplicate().get(y);
      case boolean[] z -> {
        for (int i = 0; i < n; i++) z[i] = b.get(b.position() + i) != 0;
      }
      default -> throw new IllegalStateException("not a primitive array: " + arr.getClass());
    }
    ((Buffer) b).position(b.position() + n * typeOf(arr.getClass().getComponentType()).size());
  }

  /** The native tensor for a run, held until release(). */
  MemorySegment pointer() {
    return acquire();
  }

  @Override
  public String toString() {
    return isClosed() ? "Tensor(closed)" : "Tensor(" + info.type + ", " + Arrays.toString(info.getShape()) + ")";
  }
}
