import PushClock
import PushSession
import Synchronization

/// What each loop of a service on several last said of its own readiness, so the first
/// loop's /readyz answers for all of them. A loop's checks read state only its own thread
/// may touch (its database connections, its registry), so it reports them itself, every
/// `reportInterval`; the first loop only reads the board. A loop silent for
/// `silentAfterMs` is reported as not answering: a loop thread that is stuck cannot serve
/// the connections it owns either.
public final class LoopReadinessBoard: Sendable {
    public static let reportInterval: Duration = .milliseconds(100)
    public static let silentAfterMs: Int64 = 5_000

    private struct Report {
        var readiness: Readiness
        var atMs: Int64
    }

    private let reports = Mutex<[Int: Report]>([:])

    public init() {}

    public func report(_ readiness: Readiness, loop index: Int, nowMs: Int64 = Clocks.monotonicMilliseconds()) {
        reports.withLock { $0[index] = Report(readiness: readiness, atMs: nowMs) }
    }

    /// Forgets a loop that has stopped on purpose.
    public func remove(loop index: Int) {
        _ = reports.withLock { $0.removeValue(forKey: index) }
    }

    /// Ready when every loop that reported is ready and has reported lately; otherwise the
    /// lowest-numbered loop's reason.
    public func readiness(nowMs: Int64 = Clocks.monotonicMilliseconds()) -> Readiness {
        let reports = reports.withLock { $0 }
        for index in reports.keys.sorted() {
            guard let report = reports[index] else { continue }
            if nowMs - report.atMs > LoopReadinessBoard.silentAfterMs {
                return .notReady("loop \(index) has not answered for \((nowMs - report.atMs) / 1000) s")
            }
            if case .notReady(let reason) = report.readiness { return .notReady("loop \(index): \(reason)") }
        }
        return .ready
    }
}
