import PushEventLoop
import PushPostgres

/// One connection the PostgreSQL backend keeps open on its loop, connected again with
/// backoff whenever it is lost. Work asked for while a connect is under way waits for it;
/// while the database is unreachable it fails at once, so a request is answered
/// INTERNAL_ERROR promptly instead of hanging. Loop-confined.
final class PostgresLink {
    enum State {
        case connecting
        case up(PostgresConnection)
        /// The last attempt failed, or the connection was lost; another is scheduled.
        case down(PostgresError)
        case stopped
    }

    let name: String
    private let url: String
    /// How pg_stat_activity names the connection, unless the URL names an application.
    private let applicationName: String
    private let loop: EventLoop
    private(set) var state: State = .connecting
    private var waiting: [(PostgresConnection?, PostgresError?) -> Void] = []
    private var retryTimer: LoopTimer?
    private var retryMs = PostgresLink.firstRetryMs
    /// Told of every loss of the connection (for the log) and every recovery.
    var onDown: ((PostgresError) -> Void)?
    /// `again`: the link had been up before (a recovery, not the first connect).
    var onUp: ((_ again: Bool) -> Void)?
    private var wasUp = false

    static let firstRetryMs = 50
    static let maxRetryMs = 2_000

    init(name: String, url: String, applicationName: String, loop: EventLoop) {
        self.name = name
        self.url = url
        self.applicationName = applicationName
        self.loop = loop
        connect()
    }

    var connection: PostgresConnection? {
        if case .up(let connection) = state { return connection }
        return nil
    }

    /// What is wrong while not connected, for readiness.
    var problem: String? {
        switch state {
        case .up: nil
        case .connecting: "connecting to the database"
        case .down(let error): "database unreachable: \(error)"
        case .stopped: "stopped"
        }
    }

    /// Runs `body` with the connection, once connected if a connect is under way; with the
    /// error if there is no connection to be had now.
    func use(_ body: @escaping (PostgresConnection?, PostgresError?) -> Void) {
        switch state {
        case .up(let connection): body(connection, nil)
        case .connecting: waiting.append(body)
        case .down(let error): body(nil, error)
        case .stopped: body(nil, PostgresError(kind: .connection, message: "the store is stopping"))
        }
    }

    /// Closes the connection; pending work fails with `.connection`. No reconnect follows.
    func stop() {
        retryTimer?.cancel()
        retryTimer = nil
        let previous = state
        state = .stopped
        if case .up(let connection) = previous {
            connection.onClose = nil
            connection.close()
        }
        flushWaiting(nil, PostgresError(kind: .connection, message: "the store is stopping"))
    }

    private func connect() {
        state = .connecting
        PostgresConnection.connect(url, applicationName: applicationName, on: loop) { [weak self] result in
            guard let self else {
                if case .success(let connection) = result { connection.close() }
                return
            }
            guard case .connecting = state else {
                if case .success(let connection) = result { connection.close() }
                return
            }
            switch result {
            case .success(let connection):
                retryMs = PostgresLink.firstRetryMs
                state = .up(connection)
                connection.onClose = { [weak self] error in self?.lost(error) }
                flushWaiting(connection, nil)
                onUp?(wasUp)
                wasUp = true
            case .failure(let error):
                state = .down(error)
                flushWaiting(nil, error)
                scheduleRetry()
            }
        }
    }

    /// The connection died: whatever it had in flight has failed already (its outcome
    /// unknown); connect again at once, then with backoff.
    private func lost(_ error: PostgresError) {
        guard case .up = state else { return }
        state = .down(error)
        onDown?(error)
        retryMs = PostgresLink.firstRetryMs
        scheduleRetry()
    }

    private func scheduleRetry() {
        let delay = retryMs
        retryMs = min(retryMs * 2, PostgresLink.maxRetryMs)
        retryTimer?.cancel()
        retryTimer = loop.schedule(after: .milliseconds(delay)) { [weak self] in
            guard let self, case .down = state else { return }
            connect()
        }
    }

    private func flushWaiting(_ connection: PostgresConnection?, _ error: PostgresError?) {
        let all = waiting
        waiting = []
        for body in all { body(connection, error) }
    }
}
