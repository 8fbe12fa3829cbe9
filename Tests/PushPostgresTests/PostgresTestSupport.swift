import PushEventLoop
import PushPostgres
import PushTestSupport
import Testing

struct TimedOut: Error, CustomStringConvertible {
    var description: String
}

/// The process-wide cluster, started off the cooperative pool (initdb takes seconds).
func sharedCluster() async throws -> PostgresCluster {
    try await onOwnThread { try PostgresCluster.shared() }
}

/// A fresh database on the shared cluster.
func freshDatabase() async throws -> String {
    let cluster = try await sharedCluster()
    return try await onOwnThread { try cluster.createDatabase() }
}

/// Starts an asynchronous operation and runs `loop` until its completion has run.
func wait<T>(_ loop: EventLoop, timeoutSeconds: Double = 15, _ start: (@escaping (T) -> Void) -> Void) throws -> T {
    var outcome: T?
    start { outcome = $0 }
    guard loop.run(until: { outcome != nil }, timeoutSeconds: timeoutSeconds), let outcome else {
        throw TimedOut(description: "no completion within \(timeoutSeconds) s")
    }
    return outcome
}

func connect(_ url: String, on loop: EventLoop) throws -> PostgresConnection {
    try wait(loop) { PostgresConnection.connect(url, on: loop, completion: $0) }.get()
}

extension PostgresConnection {
    /// One query, waited for on `loop`.
    func run(_ loop: EventLoop, _ sql: String, _ parameters: [PostgresValue] = []) throws -> PostgresResult {
        try wait(loop) { query(sql, parameters, completion: $0) }.get()
    }
}

/// The error of a failed result, or nil (recording an issue) if it succeeded.
func failure<T>(_ result: Result<T, PostgresError>, sourceLocation: SourceLocation = #_sourceLocation) -> PostgresError? {
    switch result {
    case .success:
        Issue.record("expected a failure", sourceLocation: sourceLocation)
        return nil
    case .failure(let error):
        return error
    }
}
