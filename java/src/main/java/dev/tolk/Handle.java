package dev.tolk;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * The life of one native handle: calls hold it shared while they use the pointer, close() takes
 * it exclusively, so a close waits for the calls in flight and every call after it fails with
 * IllegalStateException instead of reaching freed memory. A handle borrowed from another (a
 * translator's tokenizer) holds its owner too, and frees nothing itself.
 */
abstract class Handle implements AutoCloseable {
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final String what;
  private final Handle owner;
  private MemorySegment ptr;

  Handle(MemorySegment ptr, String what, Handle owner) {
    this.ptr = ptr;
    this.what = what;
    this.owner = owner;
  }

  /** The pointer, held until the matching release(); IllegalStateException once closed. */
  final MemorySegment acquire() {
    if (owner != null) owner.acquire();
    lock.readLock().lock();
    if (ptr == null) {
      lock.readLock().unlock();
      if (owner != null) owner.release();
      throw new IllegalStateException(what + " is closed");
    }
    return ptr;
  }

  final void release() {
    lock.readLock().unlock();
    if (owner != null) owner.release();
  }

  /** Whether close() has run. */
  public final boolean isClosed() {
    lock.readLock().lock();
    try {
      return ptr == null || (owner != null && owner.isClosed());
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Frees the native object once the calls using it have returned; later calls are no-ops. */
  @Override
  public void close() {
    lock.writeLock().lock();
    try {
      if (ptr != null && owner == null) free(ptr);
      ptr = null;
    } finally {
      lock.writeLock().unlock();
    }
  }

  /** Frees the native object (called once, with no call in flight). */
  abstract void free(MemorySegment p);
}
