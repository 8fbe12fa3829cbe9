import Dispatch
import PushEventLoop

/// A service running on a loop thread of its own: started there, used there, drained
/// there, and released once the thread has been joined.
final class HostedService<Service: AnyObject>: @unchecked Sendable {
    // @unchecked: `service` and `failure` are written on the loop thread during
    // EventLoopThread's setup, which the creating thread waits for; after that `service`
    // is used on the loop only, and released after the loop thread has been joined.
    private var service: Service?
    private var failure: (any Error)?
    private var thread: EventLoopThread?

    static var stopTimeoutSeconds: Double { 15 }

    init(name: String, start: @escaping @Sendable (EventLoop) throws -> Service) throws {
        thread = try EventLoopThread(name: name) { [self] loop in
            do {
                service = try start(loop)
            } catch {
                failure = error
            }
        }
        if let failure {
            thread?.shutdown()
            thread = nil
            throw failure
        }
    }

    deinit { thread?.shutdown() }

    /// Runs `body` with the service on its loop and waits for it; nil once stopped.
    func onLoop<T>(_ body: @escaping @Sendable (Service) -> T) -> T? {
        let result = Outcome<T>()
        let done = DispatchSemaphore(value: 0)
        guard let thread, thread.handle.execute({ [self] in
            if let service { result.value = body(service) }
            done.signal()
        }) else { return nil }
        guard done.wait(timeout: .now() + HostedService.stopTimeoutSeconds) == .success else { return nil }
        return result.value
    }

    /// Asks the service to drain, waits until it has (or the time is up), then stops and
    /// joins the loop thread. Idempotent.
    func stop(drain: @escaping @Sendable (Service, _ drained: @escaping () -> Void) -> Void) {
        guard let thread else { return }
        self.thread = nil
        let done = DispatchSemaphore(value: 0)
        let posted = thread.handle.execute { [self] in
            guard let service else {
                done.signal()
                return
            }
            drain(service) { done.signal() }
        }
        if posted { _ = done.wait(timeout: .now() + HostedService.stopTimeoutSeconds) }
        thread.shutdown()
        service = nil
    }
}

/// A value handed back from the loop thread; the semaphore orders the write and the read.
private final class Outcome<T>: @unchecked Sendable {
    var value: T?
}
