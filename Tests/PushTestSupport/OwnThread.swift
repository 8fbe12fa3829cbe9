import Foundation
import Testing

/// Runs blocking work (a long protocol run, a child process) on a thread of its own and
/// suspends until it is done: the test runner shares a thread per core among all tests,
/// and a test that blocks one for many seconds holds up every other test.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// `.ownThread` on a suite runs each of its tests on a thread of its own, whole, instead of
/// on the runner's pool of one thread per core. For tests that block (on a child process,
/// a socket, a poll for a server's state): on two cores two such tests held the pool and
/// every other test waited, while the machine sat idle. The test stays in its task, so
/// `#expect` and `Test.current` work as anywhere.
///
/// At most `OwnThreadTrait.limit` such tests run at once (the others wait without holding a
/// thread): enough to overlap their waits, few enough that the processes they start do not
/// starve each other of the machine's cores.
public struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// SECUREPUSH_TEST_THREADS if set, else three per core (at least four): on two cores, four
    /// took the gateway tests 72 s and six 56 s, both passing, the CPU still half idle.
    public static let limit: Int = {
        if let text = getenv("SECUREPUSH_TEST_THREADS"), let value = Int(String(cString: text)), value > 0 { return value }
        return max(4, 3 * ProcessInfo.processInfo.activeProcessorCount)
    }()

    private static let slots = TestSlots(limit)

    /// Set inside a test that runs on its own thread: a nested suite's trait adds nothing.
    @TaskLocal private static var onOwnThread = false

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> OwnThreadTrait? {
        // Each test case; a suite itself runs nothing that blocks.
        testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard !Self.onOwnThread else { return try await function() }
        // A test with a time limit takes no slot: the wait for one would count against it.
        let slotted = test.timeLimit == nil
        if slotted { await Self.slots.acquire() }
        let thread = DedicatedThreadExecutor(name: test.name)
        defer {
            thread.finish()
            if slotted { Task { await Self.slots.release() } }
        }
        try await Self.$onOwnThread.withValue(true) {
            try await withTaskExecutorPreference(thread) { try await function() }
        }
    }
}

/// A counting semaphore whose waiters suspend instead of blocking a thread.
actor TestSlots {
    private let limit: Int
    private var taken = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ limit: Int) { self.limit = limit }

    func acquire() async {
        if taken < limit {
            taken += 1
            return
        }
        // The slot is handed over by `release`, still counted as taken.
        await withCheckedContinuation { waiting.append($0) }
    }

    /// The newest waiter first. Every test asks at the start of the run, so the line is
    /// hundreds long at once; a serialized suite's next test asks only when its previous one
    /// ends, and at the back of the line it would wait for nearly all the others, test after
    /// test, and end the run alone.
    func release() {
        if waiting.isEmpty {
            taken -= 1
        } else {
            waiting.removeLast().resume()
        }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// Each test on a thread of its own (`OwnThreadTrait`).
    public static var ownThread: Self { OwnThreadTrait() }
}

/// A task executor with one thread of its own, which runs the jobs of the task that prefers
/// it in turn until `finish()`.
final class DedicatedThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false
    /// Set when the thread has ended: a job that comes later (from an unstructured task
    /// that outlived the test) gets a thread of its own instead of waiting forever.
    private var ended = false

    init(name: String) {
        let thread = Thread { [self] in runJobs() }
        thread.name = String(name.prefix(15))
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        if ended {
            condition.unlock()
            Thread { [self] in unowned.runSynchronously(on: asUnownedTaskExecutor()) }.start()
            return
        }
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once its queue is empty.
    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                ended = true
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
