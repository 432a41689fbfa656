#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex. The daemon's shared state (inode table, handles,
/// open files) lives in these. A pthread mutex rather than Synchronization.Mutex:
/// ThreadSanitizer sees pthread locking, so `swift test --sanitize=thread` and a
/// TSan-built daemon can check the bridge (with Mutex's futex it reported every
/// guarded access as a race).
final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R, Failure: Error>(_ body: (inout Value) throws(Failure) -> R) throws(Failure) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
