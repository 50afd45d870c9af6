package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Where the tests find the source tree and the CLI they compare with: the system properties
 * tolk.root and tolk.cli, which pom.xml sets for a CMake build in build/ (scripts/java_test.sh
 * passes its own).
 */
final class Fixtures {
  private Fixtures() {}

  static final Path ROOT = Path.of(System.getProperty("tolk.root", "..")).toAbsolutePath().normalize();
  static final Path CLI = Path.of(System.getProperty("tolk.cli", "../build/tolk")).toAbsolutePath();
  static final Path MARIAN_TINY = ROOT.resolve("tests/fixtures/marian-tiny");
  static final Path DEMO = ROOT.resolve("models/demo-en-zh");
  static final Path SIMPLE_CNN = ROOT.resolve("tests/fixtures/simple-cnn");

  /** Runs the tolk CLI, checks it exits 0 and returns its stdout lines. */
  static List<String> cli(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(CLI.toString());
    cmd.addAll(List.of(args));
    try {
      Path err = Files.createTempFile("tolk-cli", ".err");
      try {
        Process p =
            new ProcessBuilder(cmd)
                .redirectError(err.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          throw new AssertionError("timed out: " + cmd);
        }
        assertEquals(0, p.exitValue(), () -> cmd + " failed: " + read(err));
        List<String> lines = List.of(out.split("\n", -1));
        return lines.subList(0, out.endsWith("\n") ? lines.size() - 1 : lines.size());
      } finally {
        Files.deleteIfExists(err);
      }
    } catch (IOException e) {
      throw new AssertionError("cannot run " + cmd, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      return "(stderr unreadable: " + e + ")";
    }
  }
}
