#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs `count` jobs on `workers` threads, each job on whichever thread takes it next, and
/// returns when all are done. Client cases spend their time waiting on their client, each
/// with a loop and servers of its own, so several run side by side on a 2-core machine.
final class CaseWorkers: Sendable {
    private let next = Atomic<Int>(0)
    private let count: Int
    private let job: @Sendable (Int) -> Void

    private init(count: Int, job: @escaping @Sendable (Int) -> Void) {
        self.count = count
        self.job = job
    }

    static func run(count: Int, workers: Int, _ job: @escaping @Sendable (Int) -> Void) {
        let pool = CaseWorkers(count: count, job: job)
        guard workers > 1, count > 1 else { return pool.work() }
        var threads: [pthread_t] = []
        for _ in 0..<min(workers, count) {
            var thread = pthread_t()
            // Unmanaged for C interop: pthread_create hands its start routine one context pointer.
            let context = Unmanaged.passRetained(pool).toOpaque()
            let created = pthread_create(&thread, nil, { context in
                guard let context else { return nil }
                Unmanaged<CaseWorkers>.fromOpaque(context).takeRetainedValue().work()
                return nil
            }, context)
            if created == 0 {
                threads.append(thread)
            } else {
                Unmanaged<CaseWorkers>.fromOpaque(context).release()
            }
        }
        // With no thread at all (none could be made), the caller does the work itself.
        if threads.isEmpty { pool.work() }
        for thread in threads { pthread_join(thread, nil) }
    }

    private func work() {
        while true {
            let index = next.add(1, ordering: .relaxed).oldValue
            guard index < count else { return }
            job(index)
        }
    }
}
