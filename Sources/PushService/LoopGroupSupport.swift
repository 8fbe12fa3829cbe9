import PushEventLoop
import Synchronization

/// One loop of a service on several (after the caller's own): its thread, the service
/// started on it, and its metrics for the first loop's /metrics. Kept until shutdown.
public struct ServiceLoopThread<Service>: Sendable {
    public let thread: EventLoopThread
    public let service: LoopBound<Service>
    public let metrics: MetricsSource

    /// Starts a thread named `name` with a loop of its own, starts the service there with
    /// `start`, and waits for it. From then on the loop puts the service's `readiness` on
    /// `board` as loop `index`, every `LoopReadinessBoard.reportInterval`. `cannotStart`
    /// turns a thread that could not be made into the service's own error.
    public static func start<Failure: Error>(
        name: String, index: Int, start: @escaping @Sendable (EventLoop) throws(Failure) -> Service,
        metrics: @escaping @Sendable (Service) -> MetricsRegistry,
        readiness: @escaping @Sendable (Service) -> Readiness, board: LoopReadinessBoard, cannotStart: (String) -> Failure
    ) throws(Failure) -> ServiceLoopThread {
        let outcome = LoopStartOutcome<(LoopBound<Service>, MetricsSource), Failure>()
        let thread: EventLoopThread
        do {
            thread = try EventLoopThread(name: name) { loop in
                do throws(Failure) {
                    let service = try start(loop)
                    board.report(readiness(service), loop: index)
                    loop.schedule(after: LoopReadinessBoard.reportInterval, repeating: true) {
                        board.report(readiness(service), loop: index)
                    }
                    outcome.set(.success((LoopBound(service, loop: loop), MetricsSource(metrics(service), loop: loop))))
                } catch {
                    outcome.set(.failure(error))
                }
            }
        } catch {
            throw cannotStart("cannot start loop thread \(name): \(error)")
        }
        switch outcome.result {
        case .success(let (service, metrics))?:
            return ServiceLoopThread(thread: thread, service: service, metrics: metrics)
        case .failure(let error)?:
            thread.shutdown()
            throw error
        case nil:
            thread.shutdown()
            throw cannotStart("loop thread \(name) did not start")
        }
    }

    /// Drains the first loop's service (with `drainFirst`, on the caller's loop) and every
    /// other loop's (with `drain`, each on its own loop); `then` runs on the caller's loop
    /// once all have drained.
    public static func drainAll(_ others: [ServiceLoopThread], on loop: EventLoop, drainFirst: (@escaping () -> Void) -> Void,
                                drain: @escaping @Sendable (Service, @escaping () -> Void) -> Void, then: @escaping () -> Void) {
        let countdown = LoopBound(LoopCountdown(remaining: others.count + 1, then: then), loop: loop)
        drainFirst { countdown.value.done() }
        for other in others {
            let service = other.service
            service.handle.execute {
                drain(service.value) {
                    countdown.handle.execute { countdown.value.done() }
                }
            }
        }
    }
}

/// Runs its closure when `done` has been called `remaining` times. Loop-confined.
final class LoopCountdown {
    private var remaining: Int
    private var then: (() -> Void)?

    init(remaining: Int, then: @escaping () -> Void) {
        self.remaining = remaining
        self.then = then
    }

    func done() {
        remaining -= 1
        guard remaining == 0, let then else { return }
        self.then = nil
        then()
    }
}

/// What a loop thread's setup hands back to the thread that started it and waits for it.
final class LoopStartOutcome<Value: Sendable, Failure: Error>: Sendable {
    private let stored = Mutex<Result<Value, Failure>?>(nil)

    func set(_ result: Result<Value, Failure>) { stored.withLock { $0 = result } }

    var result: Result<Value, Failure>? { stored.withLock { $0 } }
}
