package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class TensorTest {
  @Test
  void nestedArraysRoundTrip() {
    float[][] f = {{1, 2, 3}, {4, 5, 6}};
    try (Tensor t = Tensor.createTensor(f)) {
      assertEquals(DataType.FLOAT, t.getInfo().type);
      assertArrayEquals(new long[] {2, 3}, t.getInfo().getShape());
      assertEquals(6, t.getInfo().getNumElements());
      float[][] back = (float[][]) t.getValue();
      assertArrayEquals(f[0], back[0]);
      assertArrayEquals(f[1], back[1]);
    }
    long[][][] l = {{{1L << 40, -2}}, {{3, 4}}};
    try (Tensor t = Tensor.createTensor(l)) {
      assertEquals(DataType.INT64, t.getType());
      assertArrayEquals(new long[] {2, 1, 2}, t.getShape());
      assertArrayEquals(new long[] {1L << 40, -2}, ((long[][][]) t.getValue())[0][0]);
    }
    boolean[] z = {true, false, true};
    try (Tensor t = Tensor.createTensor(z)) {
      assertEquals(DataType.BOOL, t.getType());
      assertArrayEquals(z, (boolean[]) t.getValue());
    }
    try (Tensor t = Tensor.createTensor(new int[] {7, -8})) {
      assertArrayEquals(new int[] {7, -8}, (int[]) t.getValue());
    }
  }

  @Test
  void scalarsAndEmptyTensors() {
    try (Tensor t = Tensor.createTensor(2.5f)) {
      assertEquals(0, t.getShape().length);
      assertEquals(2.5f, t.getValue());
    }
    // An empty Java array has no rows to read the inner dims from: they read as 0.
    try (Tensor t = Tensor.createTensor(new float[0][4])) {
      assertArrayEquals(new long[] {0, 0}, t.getShape());
      assertEquals(0, ((float[][]) t.getValue()).length);
    }
    try (Tensor t = Tensor.createTensor(FloatBuffer.allocate(0), new long[] {0, 4})) {
      assertArrayEquals(new long[] {0, 4}, t.getShape());
      assertEquals(0, t.getFloatBuffer().remaining());
    }
  }

  @Test
  void buffersAndFlatArrays() {
    try (Tensor t = Tensor.createTensor(FloatBuffer.wrap(new float[] {1, 2, 3, 4}), new long[] {2, 2})) {
      FloatBuffer b = t.getFloatBuffer();
      assertEquals(4, b.remaining());
      assertEquals(4f, b.get(3));
    }
    try (Tensor t = Tensor.createTensor(LongBuffer.wrap(new long[] {9, 8, 7}), new long[] {3})) {
      assertEquals(7L, t.getLongBuffer().get(2));
    }
    try (Tensor t = Tensor.createTensor(IntBuffer.wrap(new int[] {5, 6}), new long[] {1, 2})) {
      assertArrayEquals(new int[][] {{5, 6}}, (int[][]) t.getValue());
    }
    try (Tensor t = Tensor.createTensor(new long[] {1, 2, 3, 4, 5, 6}, new long[] {3, 2})) {
      assertEquals(6L, ((long[][]) t.getValue())[2][1]);
    }
  }

  @Test
  void bigEndianBytesAreSwapped() {
    ByteBuffer be = ByteBuffer.allocate(8).order(ByteOrder.BIG_ENDIAN);
    be.putFloat(1.25f).putFloat(-3f).flip();
    try (Tensor t = Tensor.createTensor(be, new long[] {2}, DataType.FLOAT)) {
      assertArrayEquals(new float[] {1.25f, -3f}, (float[]) t.getValue());
      ByteBuffer raw = t.getByteBuffer();
      assertEquals(ByteOrder.nativeOrder(), raw.order());
      assertEquals(1.25f, raw.getFloat(0));
    }
  }

  @Test
  void badShapesAndTypesAreRefused() {
    // Too few elements for the shape: libtolk's own check and message.
    TolkException e =
        assertThrows(TolkException.class, () -> Tensor.createTensor(new float[] {1, 2, 3}, new long[] {2, 2}));
    assertEquals(TolkException.Status.INVALID_ARGUMENT, e.status(), e.getMessage());
    assertThrows(TolkException.class, () -> Tensor.createTensor(new float[] {1}, new long[] {-1}));
    IllegalArgumentException ragged =
        assertThrows(IllegalArgumentException.class, () -> Tensor.createTensor(new float[][] {{1, 2}, {3}}));
    assertTrue(ragged.getMessage().startsWith("ragged array"), ragged.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Tensor.createTensor(new String[] {"a"}));
    assertThrows(IllegalArgumentException.class, () -> Tensor.createTensor("text"));
    try (Tensor t = Tensor.createTensor(new int[] {1})) {
      IllegalStateException w = assertThrows(IllegalStateException.class, t::getFloatBuffer);
      assertEquals("the tensor holds INT32, not FLOAT", w.getMessage());
    }
  }

  @Test
  void loadingBadFilesIsAnError() {
    Path missing = Fixtures.ROOT.resolve("no-such-tensor.pb");
    TolkException e = assertThrows(TolkException.class, () -> Tensor.load(missing));
    assertTrue(e.getMessage().contains("no-such-tensor.pb"), e.getMessage());
    // A model file is protobuf but not a TensorProto.
    assertThrows(TolkException.class, () -> Tensor.load(Fixtures.SIMPLE_CNN.resolve("model.onnx")));
  }

  @Test
  void closedTensorThrows() {
    Tensor t = Tensor.createTensor(new float[] {1});
    t.close();
    t.close();
    assertTrue(t.isClosed());
    assertEquals("Tensor(closed)", t.toString());
    assertThrows(IllegalStateException.class, t::getFloatBuffer);
    assertThrows(IllegalStateException.class, t::getShape);
  }
}
