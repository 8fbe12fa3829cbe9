import Synchronization

/// Runs its closure when `done` has been called `remaining` times: a service on several
/// loops waits with it for every loop to drain. Loop-confined.
public final class LoopCountdown {
    private var remaining: Int
    private var then: (() -> Void)?

    public init(remaining: Int, then: @escaping () -> Void) {
        self.remaining = remaining
        self.then = then
    }

    public func done() {
        remaining -= 1
        guard remaining == 0, let then else { return }
        self.then = nil
        then()
    }
}

/// What a loop thread's setup hands back to the thread that started it and waits for it.
public final class LoopStartOutcome<Value: Sendable, Failure: Error>: Sendable {
    private let stored = Mutex<Result<Value, Failure>?>(nil)

    public init() {}

    public func set(_ result: Result<Value, Failure>) { stored.withLock { $0 = result } }

    public var result: Result<Value, Failure>? { stored.withLock { $0 } }
}
