import Glibc
import Synchronization

/// A number for the calling thread that no other thread of the process ever gets, for
/// checking that loop-bound work runs on its loop's thread. A `pthread_t` would not do:
/// the system hands the id of a thread that ended to the next one it starts, so a check
/// against a finished loop's thread could pass on a stranger.
enum ThreadSerial {
    /// The calling thread's number, given on its first call.
    static var current: UInt {
        if let stored = pthread_getspecific(threadSerialKey) { return UInt(bitPattern: stored) }
        let serial = nextThreadSerial.add(1, ordering: .relaxed).newValue
        pthread_setspecific(threadSerialKey, UnsafeRawPointer(bitPattern: serial))
        return serial
    }
}

private let threadSerialKey: pthread_key_t = {
    var key = pthread_key_t()
    // Fails only when the process has used up its keys (PTHREAD_KEYS_MAX, 1,024): a
    // start-up condition no peer can cause.
    precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left")
    return key
}()

private let nextThreadSerial = Atomic<UInt>(0)
