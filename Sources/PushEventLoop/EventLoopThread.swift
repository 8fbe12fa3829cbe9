import CLibevent
import Glibc
import Synchronization

/// An `EventLoop` running on its own pthread.
///
/// The loop is created on the new thread (so it belongs to it), `setup` runs there
/// before the initializer returns, and `shutdown()` stops the loop, closes everything
/// left open on it and joins the thread.
public final class EventLoopThread: Sendable {
    public let handle: LoopHandle
    private let thread: pthread_t
    private let joined = Mutex(false)

    public init(
        name: String = "event-loop", setup: @escaping @Sendable (EventLoop) -> Void = { _ in }
    ) throws(EventLoopError) {
        let startup = Startup(name: name, setup: setup)
        var thread = pthread_t()
        let argument = Unmanaged.passRetained(startup).toOpaque()
        let created = pthread_create(&thread, nil, loopThreadMain, argument)
        guard created == 0 else {
            Unmanaged<Startup>.fromOpaque(argument).release()
            throw .system(operation: "pthread_create", errno: created)
        }
        startup.waitUntilStarted()
        switch startup.result {
        case .success(let handle)?:
            self.handle = handle
            self.thread = thread
        case .failure(let error)?:
            pthread_join(thread, nil)
            throw error
        case nil:
            pthread_join(thread, nil)
            throw .libevent("event loop thread exited during startup")
        }
    }

    deinit { shutdown() }

    /// Stops the loop, lets it close its resources, and joins the thread. Idempotent.
    /// From the loop's own thread it only stops the loop (a thread cannot join itself).
    public func shutdown() {
        let first = joined.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        handle.stop()
        if handle.isInLoopThread {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

extension EventLoop {
    /// Starts a loop on its own thread; see `EventLoopThread`.
    public static func startThread(
        name: String = "event-loop", setup: @escaping @Sendable (EventLoop) -> Void = { _ in }
    ) throws(EventLoopError) -> EventLoopThread {
        try EventLoopThread(name: name, setup: setup)
    }
}

/// Startup handshake between the creating thread and the loop thread.
///
/// `@unchecked Sendable`: `result` is written only by the loop thread before `sem_post`
/// and read only by the creator after `sem_wait`, which orders the two accesses.
private final class Startup: @unchecked Sendable {
    let name: String
    let setup: @Sendable (EventLoop) -> Void
    var result: Result<LoopHandle, EventLoopError>?
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(name: String, setup: @escaping @Sendable (EventLoop) -> Void) {
        self.name = name
        self.setup = setup
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func started(_ result: Result<LoopHandle, EventLoopError>) {
        self.result = result
        sem_post(semaphore)
    }

    func waitUntilStarted() {
        while sem_wait(semaphore) != 0, errno == EINTR {}
    }
}

private func loopThreadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let startup = Unmanaged<Startup>.fromOpaque(argument).takeRetainedValue()
    // Linux thread names are at most 15 bytes.
    _ = sp_set_thread_name(String(startup.name.utf8.prefix(15)) ?? "event-loop")
    let loop: EventLoop
    do {
        loop = try EventLoop()
    } catch {
        startup.started(.failure(error))
        return nil
    }
    startup.setup(loop)
    startup.started(.success(loop.handle))
    loop.run()
    loop.shutdown()
    return nil
}
