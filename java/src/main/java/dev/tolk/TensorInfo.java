package dev.tolk;

import java.util.Arrays;
import java.util.List;

/**
 * The type and shape of a tensor, or of a model's declared input or output. For a declared
 * value a dim is -1 when it is symbolic or unknown (its symbol, when there is one, is in
 * {@link #dimNames()}), and the shape is empty with {@link #rank()} -1 when the rank is not
 * declared. Shaped like ONNX Runtime's {@code TensorInfo}: {@code getShape()}, {@code type}.
 */
public final class TensorInfo {
  /** The element type. */
  public final DataType type;

  private final long[] shape;
  private final int rank;
  private final List<String> dimNames;

  TensorInfo(DataType type, int rank, long[] shape, List<String> dimNames) {
    this.type = type;
    this.rank = rank;
    this.shape = shape;
    this.dimNames = dimNames;
  }

  /** A copy of the shape. */
  public long[] getShape() {
    return shape.clone();
  }

  /** The number of dims; -1 for a declared value of unknown rank. */
  public int rank() {
    return rank;
  }

  /** The element type. */
  public DataType type() {
    return type;
  }

  /** Per dim, its symbol ("batch_size") or null. */
  public List<String> dimNames() {
    return dimNames;
  }

  /** Elements of a tensor of this shape; -1 when a dim is not known. */
  public long getNumElements() {
    long n = 1;
    for (long d : shape) {
      if (d < 0) return -1;
      n *= d;
    }
    return n;
  }

  @Override
  public String toString() {
    return "TensorInfo(" + type + ", " + Arrays.toString(shape) + ")";
  }
}
