package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** ONNX sessions on tests/fixtures/simple-cnn: a small CNN with ONNX test data sets. */
class SessionTest {
  static final Path MODEL = Fixtures.SIMPLE_CNN.resolve("model.onnx");
  static InferenceSession session;

  @BeforeAll
  static void load() {
    session = Tolk.session(MODEL, new InferenceSession.Options().threads(1));
  }

  @AfterAll
  static void free() {
    session.close();
  }

  private static Path data(int set, String file) {
    return Fixtures.SIMPLE_CNN.resolve("test_data_set_" + set).resolve(file);
  }

  @Test
  void declaredInputsAndOutputs() {
    assertEquals(Set.of("input"), session.getInputNames());
    assertEquals(Set.of("output"), session.getOutputNames());
    TensorInfo in = session.getInputInfo().get("input");
    assertEquals(DataType.FLOAT, in.type);
    assertArrayEquals(new long[] {-1, 3, 32, 32}, in.getShape());
    assertEquals(List.of("batch_size"), in.dimNames().subList(0, 1));
    assertEquals(null, in.dimNames().get(1));
    assertArrayEquals(new long[] {-1, 10}, session.getOutputInfo().get("output").getShape());
  }

  @Test
  void outputsMatchTheOnnxTestData() {
    for (int set = 0; set < 2; set++) {
      try (Tensor in = Tensor.load(data(set, "input_0.pb"));
          Tensor want = Tensor.load(data(set, "output_0.pb"));
          InferenceSession.Result r = session.run(Map.of("input", in))) {
        Tensor got = r.get("output").orElseThrow();
        assertArrayEquals(want.getShape(), got.getShape());
        float[] g = toArray(got), w = toArray(want);
        for (int i = 0; i < w.length; i++) assertEquals(w[i], g[i], 1e-5f, "element " + i);
      }
    }
  }

  @Test
  void outputsEqualTolkRun(@TempDir Path tmp) throws IOException {
    Path in = data(1, "input_0.pb");
    Fixtures.cli("run", MODEL.toString(), "--threads", "1", "--input", "input=" + in, "--output-dir", tmp.toString());
    float[] want = readNpyFloats(tmp.resolve("output.npy"));
    try (Tensor t = Tensor.load(in); InferenceSession.Result r = session.run(Map.of("input", t))) {
      assertArrayEquals(new long[] {7, 10}, r.get(0).getShape());
      assertArrayEquals(want, toArray(r.get(0)));
    }
  }

  @Test
  void tensorsFromJavaArraysRun() {
    float[][][][] x = new float[2][3][32][32];
    for (int c = 0; c < 3; c++) for (int i = 0; i < 32; i++) x[1][c][i][(i * 7 + c) % 32] = 1.5f;
    try (Tensor in = Tensor.createTensor(x); InferenceSession.Result r = session.run(Map.of("input", in))) {
      float[][] y = (float[][]) r.get(0).getValue();
      assertEquals(2, y.length);
      assertEquals(10, y[0].length);
      // Row 1 alone gives the same row: rows are independent in this model.
      try (Tensor one = Tensor.createTensor(new float[][][][] {x[1]});
          InferenceSession.Result r1 = session.run(Map.of("input", one))) {
        assertArrayEquals(((float[][]) r1.get(0).getValue())[0], y[1]);
      }
    }
  }

  @Test
  void wrongDtypeIsATypeError() {
    try (Tensor in = Tensor.createTensor(new long[3 * 32 * 32], new long[] {1, 3, 32, 32})) {
      TolkException.Type e = assertThrows(TolkException.Type.class, () -> session.run(Map.of("input", in)));
      assertEquals(TolkException.Status.TYPE, e.status());
      assertTrue(e.getMessage().contains("input"), e.getMessage());
    }
  }

  @Test
  void wrongShapeIsAShapeError() {
    try (Tensor in = Tensor.createTensor(new float[3 * 16 * 16], new long[] {1, 3, 16, 16})) {
      TolkException.Shape e = assertThrows(TolkException.Shape.class, () -> session.run(Map.of("input", in)));
      assertTrue(e.getMessage().contains("input"), e.getMessage());
    }
  }

  @Test
  void unknownNamesAndMissingInputsAreRefused() {
    try (Tensor in = Tensor.createTensor(new float[3 * 32 * 32], new long[] {1, 3, 32, 32})) {
      TolkException e = assertThrows(TolkException.class, () -> session.run(Map.of("pixels", in)));
      assertTrue(e.getMessage().contains("pixels"), e.getMessage());
      e = assertThrows(TolkException.class, () -> session.run(Map.of("input", in), Set.of("logits")));
      assertTrue(e.getMessage().contains("logits"), e.getMessage());
      e = assertThrows(TolkException.class, () -> session.run(Map.of()));
      assertTrue(e.getMessage().contains("input"), e.getMessage());
    }
  }

  @Test
  void closedTensorsAndSessionsThrow() {
    Tensor in = Tensor.createTensor(new float[3 * 32 * 32], new long[] {1, 3, 32, 32});
    in.close();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> session.run(Map.of("input", in)));
    assertEquals("tensor is closed", e.getMessage());
    assertThrows(IllegalStateException.class, in::getValue);
    assertThrows(IllegalStateException.class, in::getInfo);

    InferenceSession s = Tolk.session(MODEL);
    s.close();
    try (Tensor ok = Tensor.createTensor(new float[3 * 32 * 32], new long[] {1, 3, 32, 32})) {
      e = assertThrows(IllegalStateException.class, () -> s.run(Map.of("input", ok)));
      assertEquals("session is closed", e.getMessage());
    }
    assertThrows(IllegalStateException.class, s::getInputNames);
  }

  @Test
  void resultCloseFreesItsTensors() {
    Tensor out;
    try (Tensor in = Tensor.load(data(0, "input_0.pb")); InferenceSession.Result r = session.run(Map.of("input", in))) {
      out = r.get(0);
      assertEquals(1, r.size());
    }
    assertTrue(out.isClosed());
  }

  @Test
  void badModelFilesAreRefused(@TempDir Path tmp) throws IOException {
    TolkException e = assertThrows(TolkException.class, () -> Tolk.session(tmp.resolve("missing.onnx")));
    assertTrue(e.getMessage().contains("missing.onnx"), e.getMessage());
    Path junk = tmp.resolve("junk.onnx");
    Files.writeString(junk, "this is not protobuf at all");
    e = assertThrows(TolkException.class, () -> Tolk.session(junk));
    assertEquals(TolkException.Status.MALFORMED, e.status(), e.getMessage());
    assertTrue(e.getMessage().contains("junk.onnx"), e.getMessage());
  }

  @Test
  void concurrentRunsAgree() throws Exception {
    try (Tensor in = Tensor.load(data(1, "input_0.pb"))) {
      float[] want;
      try (InferenceSession.Result r = session.run(Map.of("input", in))) {
        want = toArray(r.get(0));
      }
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Future<float[]>> runs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
          runs.add(
              pool.submit(
                  () -> {
                    try (InferenceSession.Result r = session.run(Map.of("input", in))) {
                      return toArray(r.get(0));
                    }
                  }));
        }
        for (Future<float[]> f : runs) assertArrayEquals(want, f.get());
      } finally {
        pool.shutdown();
      }
    }
  }

  static float[] toArray(Tensor t) {
    java.nio.FloatBuffer b = t.getFloatBuffer();
    float[] a = new float[b.remaining()];
    b.get(a);
    return a;
  }

  /** The data of a little-endian float32 .npy file (version 1, C order), as tolk run writes. */
  static float[] readNpyFloats(Path p) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
    assertEquals((byte) 0x93, b.get(0));
    int headerLen = b.getShort(8) & 0xffff;
    String header = new String(b.array(), 10, headerLen, java.nio.charset.StandardCharsets.US_ASCII);
    assertTrue(header.contains("'descr': '<f4'"), header);
    b.position(10 + headerLen);
    float[] a = new float[b.remaining() / 4];
    b.asFloatBuffer().get(a);
    return a;
  }
}
