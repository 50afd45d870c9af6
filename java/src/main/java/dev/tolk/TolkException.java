package dev.tolk;

/**
 * A libtolk call failed: {@link #status()} is its {@code tolk_status} and the message is the
 * library's own, naming what failed and where (file, node, input, shape). One subclass per
 * status, so callers can catch what they handle ({@code catch (TolkException.Shape e)}) and
 * let the rest through.
 *
 * <p>Unchecked, unlike ONNX Runtime's {@code OrtException}: translations run in lambdas and
 * executor tasks, where checked exceptions only get wrapped.
 */
public class TolkException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The codes of {@code tolk_status}, numbered as in tolk.h. */
  public enum Status {
    OK(0),
    INVALID_ARGUMENT(1),
    IO(2),
    MALFORMED(3),
    INVALID_MODEL(4),
    UNSUPPORTED(5),
    NO_MEMORY(6),
    LIMIT(7),
    SHAPE(8),
    TYPE(9),
    NOT_FOUND(10),
    INTERNAL(11),
    CANCELLED(12);

    private final int code;

    Status(int code) {
      this.code = code;
    }

    /** The number tolk.h gives it. */
    public int code() {
      return code;
    }

    /** The status of a code; codes this version does not know read as INTERNAL. */
    public static Status of(int code) {
      for (Status s : values()) if (s.code == code) return s;
      return INTERNAL;
    }
  }

  private final Status status;

  TolkException(Status status, String message) {
    super(message);
    this.status = status;
  }

  /** The library's status code for the failure. */
  public Status status() {
    return status;
  }

  /** The exception for a failed call: the subclass of its status. */
  static TolkException of(int code, String message) {
    Status s = Status.of(code);
    return switch (s) {
      case INVALID_ARGUMENT -> new InvalidArgument(message);
      case IO -> new Io(message);
      case MALFORMED -> new Malformed(message);
      case INVALID_MODEL -> new InvalidModel(message);
      case UNSUPPORTED -> new Unsupported(message);
      case NO_MEMORY -> new NoMemory(message);
      case LIMIT -> new Limit(message);
      case SHAPE -> new Shape(message);
      case TYPE -> new Type(message);
      case NOT_FOUND -> new NotFound(message);
      case CANCELLED -> new Cancelled(message);
      default -> new TolkException(s, message);
    };
  }

  /** A caller passed something unusable. */
  public static final class InvalidArgument extends TolkException {
    private static final long serialVersionUID = 1L;

    InvalidArgument(String m) {
      super(Status.INVALID_ARGUMENT, m);
    }
  }

  /** A file could not be opened, read or mapped. */
  public static final class Io extends TolkException {
    private static final long serialVersionUID = 1L;

    Io(String m) {
      super(Status.IO, m);
    }
  }

  /** The bytes are not a valid encoding (protobuf, JSON, sentencepiece). */
  public static final class Malformed extends TolkException {
    private static final long serialVersionUID = 1L;

    Malformed(String m) {
      super(Status.MALFORMED, m);
    }
  }

  /** Well-formed, but breaks ONNX's rules or the model folder's. */
  public static final class InvalidModel extends TolkException {
    private static final long serialVersionUID = 1L;

    InvalidModel(String m) {
      super(Status.INVALID_MODEL, m);
    }
  }

  /** Valid, but tolk cannot do it (yet). */
  public static final class Unsupported extends TolkException {
    private static final long serialVersionUID = 1L;

    Unsupported(String m) {
      super(Status.UNSUPPORTED, m);
    }
  }

  /** The library ran out of memory. */
  public static final class NoMemory extends TolkException {
    private static final long serialVersionUID = 1L;

    NoMemory(String m) {
      super(Status.NO_MEMORY, m);
    }
  }

  /** A size or depth bound was exceeded (file size, memory limit, nesting). */
  public static final class Limit extends TolkException {
    private static final long serialVersionUID = 1L;

    Limit(String m) {
      super(Status.LIMIT, m);
    }
  }

  /** A tensor's shape does not match what the model declares. */
  public static final class Shape extends TolkException {
    private static final long serialVersionUID = 1L;

    Shape(String m) {
      super(Status.SHAPE, m);
    }
  }

  /** A tensor's element type does not match what the model declares. */
  public static final class Type extends TolkException {
    private static final long serialVersionUID = 1L;

    Type(String m) {
      super(Status.TYPE, m);
    }
  }

  /** No such file, input, output or key. */
  public static final class NotFound extends TolkException {
    private static final long serialVersionUID = 1L;

    NotFound(String m) {
      super(Status.NOT_FOUND, m);
    }
  }

  /** The call was cancelled. */
  public static final class Cancelled extends TolkException {
    private static final long serialVersionUID = 1L;

    Cancelled(String m) {
      super(Status.CANCELLED, m);
    }
  }
}
