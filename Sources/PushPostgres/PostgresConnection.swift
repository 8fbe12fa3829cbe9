import CPostgres
import PushEventLoop

/// A PostgreSQL connection driven by an `EventLoop`: libpq in non-blocking pipeline mode,
/// its socket watched by the loop, so requests stream to the server without waiting a
/// round trip each and answers come back in order. No threads. Loop-confined.
///
/// Every request is its own pipeline segment (a sync follows it), so a failing statement
/// never disturbs the requests around it. Completions run on the loop, in request order,
/// and never inside the call that made the request. The caller owns the connection:
/// dropping the last reference closes it like `close()`.
///
/// Not for COPY, LISTEN/NOTIFY or statements that manage transactions themselves (BEGIN,
/// COMMIT): use `transaction` for atomic groups.
public final class PostgresConnection {
    enum State {
        case connecting((Result<PostgresConnection, PostgresError>) -> Void)
        case ready
        case closed
    }

    /// What PQconnectPoll last asked to wait for.
    enum Polling {
        case reading
        case writing
    }

    let loop: EventLoop
    var conn: OpaquePointer?
    var watch: FileDescriptorWatch?
    var state: State = .closed
    var polling: Polling = .writing
    var connectTimer: LoopTimer?
    var pending = PostgresRequestQueue()
    /// Nobody else holds the connection until its connect completion hands it over.
    var keepAliveWhileConnecting: PostgresConnection?

    /// Names of the statements prepared on this connection, by their parameter types and
    /// SQL text (`PostgresStatement.prepared`).
    var preparedNames: [PreparedKey: String] = [:]
    /// Numbers the prepared statements' names, never reused on the connection.
    var preparedSerial = 0
    /// Statements prepared at most: past it, a new shape runs unprepared.
    public static let maximumPrepared = 1000

    struct PreparedKey: Hashable {
        var sql: String
        var types: [UInt32]
    }

    /// Called once, after the connection was lost (server gone, socket error, protocol
    /// failure) and every pending completion has failed with `.connection`. Not called for
    /// `close()`, nor when the loop shuts down.
    public var onClose: ((PostgresError) -> Void)?

    /// Requests sent and not yet answered.
    public var pendingCount: Int { pending.count }

    /// True from a successful connect until `close()` or the connection's loss.
    public var isOpen: Bool {
        if case .ready = state { return true }
        return false
    }

    init(loop: EventLoop) {
        self.loop = loop
    }

    deinit {
        // Only reachable once connected (a connecting connection holds itself).
        let orphans = pending.removeAll()
        teardown()
        guard !orphans.isEmpty else { return }
        let error = PostgresError.connection("the connection was released with requests pending")
        loop.schedule(after: .zero) { for request in orphans { request.fail(error) } }
    }

    /// Opens a connection (`conninfo`: a `postgresql://` URL or libpq key=value string) with
    /// `synchronous_commit=on`. Completes on `loop`; an unparsable string fails with
    /// `.invalidURL`, everything else with `.connection`. The connect is bounded by the
    /// string's `connect_timeout` (10 s if it names none). pg_stat_activity shows it as
    /// `applicationName` unless the string names an application.
    public static func connect(
        _ conninfo: String, applicationName: String = "securepush", on loop: EventLoop,
        completion: @escaping (Result<PostgresConnection, PostgresError>) -> Void
    ) {
        let connection = PostgresConnection(loop: loop)
        connection.start(conninfo, applicationName: applicationName, completion)
    }

    /// Sends one statement (`$1`, `$2`… for `parameters`) as its own pipeline segment.
    public func query(
        _ sql: String, _ parameters: [PostgresValue] = [],
        completion: @escaping (Result<PostgresResult, PostgresError>) -> Void
    ) {
        let request = PostgresRequest(.query(completion))
        submit(request, statements: [PostgresStatement(sql, parameters)])
    }

    /// Sends one statement as its own pipeline segment, prepared if it says so: the first
    /// time a prepared statement is used on this connection, its Parse goes down the
    /// pipeline in the same segment just ahead of it (no round trip of its own).
    public func query(_ statement: PostgresStatement, completion: @escaping (Result<PostgresResult, PostgresError>) -> Void) {
        let request = PostgresRequest(.query(completion))
        submit(request, statements: [statement])
    }

    /// How many statements are prepared on this connection.
    public var preparedCount: Int { preparedNames.count }

    /// The statements as one atomic pipeline segment, in one round trip: every result (one
    /// per statement), or the first error with all of them rolled back. Its success means
    /// committed and, with `synchronous_commit=on`, on disk.
    ///
    /// (The segment's implicit transaction, not BEGIN…COMMIT: after a failed explicit
    /// block the server stays in an aborted transaction, and every request already
    /// pipelined behind it would fail with 25P02. The implicit one ends at the sync either
    /// way, and a failure at commit still comes back as this request's error.)
    public func transaction(
        _ statements: [PostgresStatement], completion: @escaping (Result<[PostgresResult], PostgresError>) -> Void
    ) {
        guard !statements.isEmpty else {
            deferred { completion(.success([])) }
            return
        }
        let request = PostgresRequest(.transaction(statements: statements.count, completion))
        submit(request, statements: statements)
    }

    /// Closes the connection; requests still pending fail with `.connection` (a sent
    /// request may or may not have been carried out). Idempotent.
    public func close() {
        if case .closed = state { return }
        let connectCompletion = connectingCompletion
        state = .closed
        let orphans = pending.removeAll()
        teardown()
        let error = PostgresError.connection("the connection was closed")
        let keptAlive = keepAliveWhileConnecting
        keepAliveWhileConnecting = nil
        deferred {
            withExtendedLifetime(keptAlive) {
                connectCompletion?(.failure(error))
                for request in orphans { request.fail(error) }
            }
        }
    }

    private func submit(_ request: PostgresRequest, statements: [PostgresStatement]) {
        var request = request
        guard case .ready = state, let conn else {
            deferred { request.fail(.connection("the connection is closed")) }
            return
        }
        do throws(PostgresError) {
            for statement in statements { try PostgresParameters.check(statement.sql, statement.parameters) }
        } catch {
            deferred { request.fail(error) }
            return
        }
        let encoded = statements.map { PostgresParameters($0.parameters) }
        let (names, parsed, parsesSent) = sendParses(statements, encoded, on: conn)
        var sent = parsesSent
        request.parses = parsed.count
        if !parsed.isEmpty {
            // A failed request may have failed before its Parse took: forgotten, so that the
            // next use parses again (under a new name).
            request.onFailure = { [weak self] in
                guard let self else { return }
                for key in parsed { preparedNames[key] = nil }
            }
        }
        for ((statement, parameters), name) in zip(zip(statements, encoded), names) where sent {
            sent = parameters.withArrays { types, values, lengths, formats in
                if let name {
                    PQsendQueryPrepared(conn, name, parameters.count, values, lengths, formats, 1) == 1
                } else {
                    PQsendQueryParams(conn, statement.sql, parameters.count, types, values, lengths, formats, 1) == 1
                }
            }
        }
        // PQpipelineSync also pushes what is buffered to the socket (libpq 14 to 16).
        sent = sent && PQpipelineSync(conn) == 1
        pending.append(request)
        guard sent else {
            // The checks above leave only a broken connection as a reason.
            connectionLost(errorMessage())
            return
        }
        flush()
    }

    /// A statement to prepare is parsed in the same segment, just ahead of the statements:
    /// its failure is the request's, and costs no round trip. Each statement's prepared
    /// name (nil: sent unprepared), the keys parsed now, and whether all went out.
    private func sendParses(_ statements: [PostgresStatement], _ encoded: [PostgresParameters],
                            on conn: OpaquePointer) -> (names: [String?], parsed: [PreparedKey], sent: Bool) {
        var sent = true
        var names: [String?] = []
        var parsed: [PreparedKey] = []
        for (statement, parameters) in zip(statements, encoded) where sent {
            guard statement.prepared else {
                names.append(nil)
                continue
            }
            let key = PreparedKey(sql: statement.sql, types: parameters.types)
            if let name = preparedNames[key] {
                names.append(name)
                continue
            }
            guard preparedNames.count < PostgresConnection.maximumPrepared else {
                names.append(nil)
                continue
            }
            preparedSerial += 1
            let name = "sp\(preparedSerial)"
            preparedNames[key] = name
            parsed.append(key)
            names.append(name)
            sent = parameters.withArrays { types, _, _, _ in
                PQsendPrepare(conn, name, statement.sql, parameters.count, types) == 1
            }
        }
        return (names, parsed, sent)
    }

    /// Runs `body` on the loop in a later iteration: completions never run inside the call
    /// that caused them.
    func deferred(_ body: @escaping () -> Void) {
        loop.schedule(after: .zero, body)
    }

    var connectingCompletion: ((Result<PostgresConnection, PostgresError>) -> Void)? {
        if case .connecting(let completion) = state { return completion }
        return nil
    }

    /// libpq's last error for this connection, on one line.
    func errorMessage() -> String {
        guard let conn, let text = PQerrorMessage(conn) else { return "no connection" }
        let message = PostgresURL.trimmed(String(cString: text))
        return message.isEmpty ? "connection failed" : message.split(separator: "\n").joined(separator: "; ")
    }

    /// Stops watching and frees libpq's connection (which closes its socket).
    func teardown() {
        watch?.cancel()
        watch = nil
        connectTimer?.cancel()
        connectTimer = nil
        if let conn { PQfinish(conn) }
        conn = nil
    }
}
