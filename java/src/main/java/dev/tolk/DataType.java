package dev.tolk;

/** Element types of tensors, numbered as ONNX's TensorProto.DataType (tolk.h's tolk_dtype). */
public enum DataType {
  FLOAT(1, 4),
  UINT8(2, 1),
  INT8(3, 1),
  UINT16(4, 2),
  INT16(5, 2),
  INT32(6, 4),
  INT64(7, 8),
  STRING(8, 0),
  BOOL(9, 1),
  FLOAT16(10, 2),
  DOUBLE(11, 8),
  UINT32(12, 4),
  UINT64(13, 8),
  BFLOAT16(16, 2),
  /** Declared but not set, or a type this version does not know. */
  UNDEFINED(0, 0);

  private final int code;
  private final int size;

  DataType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /** The ONNX number. */
  public int code() {
    return code;
  }

  /** Bytes per element; 0 for STRING and UNDEFINED, which no tensor can hold. */
  public int size() {
    return size;
  }

  static DataType of(int code) {
    for (DataType t : values()) if (t.code == code) return t;
    return UNDEFINED;
  }
}
