package dev.tolk;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Finds libtolk, once per JVM. In this order:
 *
 * <ol>
 *   <li>the system property {@code tolk.library.path}: the library file, or the folder holding
 *       {@code libtolk.so};
 *   <li>the environment variable {@code TOLK_LIBRARY}, read the same way;
 *   <li>{@code System.loadLibrary("tolk")}: {@code java.library.path}, which on Linux includes
 *       {@code LD_LIBRARY_PATH} and the system's library folders (where {@code cmake --install}
 *       puts it).
 * </ol>
 *
 * A failure is kept and thrown again, as a fresh {@link UnsatisfiedLinkError} naming what was
 * tried, by every later call, rather than leaving a class that failed to initialise behind.
 */
final class Library {
  private static final Object LOADED = load();

  private Library() {}

  /** The library's symbols, or the reason it could not be loaded. */
  static SymbolLookup lookup() {
    if (LOADED instanceof SymbolLookup l) return l;
    throw new UnsatisfiedLinkError((String) LOADED);
  }

  private static Object load() {
    String where = "system property tolk.library.path";
    String path = System.getProperty("tolk.library.path");
    if (path == null || path.isEmpty()) {
      where = "environment variable TOLK_LIBRARY";
      path = System.getenv("TOLK_LIBRARY");
    }
    if (path != null && !path.isEmpty()) return loadFile(Path.of(path), where);
    try {
      System.loadLibrary("tolk");
      return SymbolLookup.loaderLookup();
    } catch (UnsatisfiedLinkError e) {
      return "libtolk not found: set the system property tolk.library.path or the environment"
          + " variable TOLK_LIBRARY to libtolk.so (build/libtolk.so after the CMake build), or put"
          + " it on java.library.path (" + e.getMessage() + ")";
    }
  }

  private static Object loadFile(Path path, String where) {
    Path file = Files.isDirectory(path) ? path.resolve(System.mapLibraryName("tolk")) : path;
    if (!Files.isRegularFile(file)) {
      return "libtolk not found: " + file + " (from the " + where + ") is not a file";
    }
    try {
      return SymbolLookup.libraryLookup(file.toAbsolutePath(), Arena.global());
    } catch (IllegalArgumentException e) {
      return "libtolk could not be loaded from " + file + " (from the " + where + "): "
          + e.getMessage();
    }
  }
}
