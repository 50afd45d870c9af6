package dev.tolk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How libtolk is found: each case in a JVM of its own, since a JVM loads it once. */
class LibraryTest {
  /** Prints Tolk.version(), or the error's class and message. */
  public static void main(String[] args) {
    try {
      System.out.println("version " + Tolk.version());
    } catch (Throwable t) {
      System.out.println(t.getClass().getSimpleName() + ": " + t.getMessage());
      // A second call gives the same answer, not a class that failed to initialise.
      try {
        Tolk.translator(Fixtures.MARIAN_TINY);
      } catch (Throwable u) {
        System.out.println(u.getClass().getSimpleName() + ": " + u.getMessage());
      }
    }
  }

  private static List<String> run(String property, String env) throws IOException, InterruptedException {
    String java = ProcessHandle.current().info().command().orElseThrow();
    List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED"));
    if (property != null) cmd.add("-Dtolk.library.path=" + property);
    cmd.add("-Dtolk.root=" + Fixtures.ROOT);
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), LibraryTest.class.getName()));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().remove("TOLK_LIBRARY");
    pb.environment().remove("LD_LIBRARY_PATH");
    if (env != null) pb.environment().put("TOLK_LIBRARY", env);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), out);
    return List.of(out.split("\n"));
  }

  private static String lib() {
    return System.getProperty("tolk.library.path");
  }

  @Test
  void versionEqualsTheCli() {
    assertEquals(List.of("tolk " + Tolk.version()), Fixtures.cli("--version"));
  }

  @Test
  void propertyEnvAndFolderAreAccepted() throws Exception {
    String want = "version " + Tolk.version();
    assertEquals(List.of(want), run(lib(), null));
    assertEquals(List.of(want), run(null, lib()));
    assertEquals(List.of(want), run(java.nio.file.Path.of(lib()).getParent().toString(), null));
  }

  @Test
  void aMissingLibraryIsNamedEveryTime() throws Exception {
    List<String> out = run("/nonexistent/libtolk.so", null);
    String want =
        "UnsatisfiedLinkError: libtolk not found: /nonexistent/libtolk.so (from the system property"
            + " tolk.library.path) is not a file";
    assertEquals(List.of(want, want), out);
    out = run(null, null);
    assertTrue(out.get(0).startsWith("UnsatisfiedLinkError: libtolk not found: set the system property"), out.get(0));
    assertEquals(out.get(0), out.get(1));
  }
}
