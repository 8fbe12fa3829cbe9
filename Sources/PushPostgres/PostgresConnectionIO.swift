import CPostgres
import PushEventLoop

/// The connection's I/O: PQconnectPoll while connecting, then PQflush when the socket
/// takes bytes and PQconsumeInput / PQgetResult when it has some, matching answers to
/// requests in order.
extension PostgresConnection {
    func start(_ conninfo: String, applicationName: String, _ completion: @escaping (Result<PostgresConnection, PostgresError>) -> Void) {
        let parameters: [(key: String, value: String)]
        do throws(PostgresError) {
            parameters = try PostgresURL.sessionParameters(conninfo, applicationName: applicationName)
        } catch {
            deferred { completion(.failure(error)) }
            return
        }
        guard let conn = withConnectionArrays(parameters, { keys, values in PQconnectStartParams(keys, values, 0) }) else {
            deferred { completion(.failure(.connection("libpq could not allocate a connection"))) }
            return
        }
        self.conn = conn
        PQsetNoticeProcessor(conn, sp_pq_ignore_notice, nil)
        state = .connecting(completion)
        keepAliveWhileConnecting = self
        guard PQstatus(conn) != CONNECTION_BAD else {
            connectFailed(errorMessage())
            return
        }
        // libpq's rule: behave as if PQconnectPoll had just asked to write.
        polling = .writing
        watchSocket()
        let seconds = parameters.last { $0.key == "connect_timeout" }.flatMap { Int($0.value) }
            ?? PostgresURL.defaultConnectTimeoutSeconds
        connectTimer = loop.schedule(after: .seconds(seconds)) { [weak self] in
            self?.connectFailed("timed out after \(seconds) s")
        }
    }

    /// (Re)creates the watch on libpq's current socket. While connecting this runs after
    /// every PQconnectPoll: libpq may close its socket and open another (the next address
    /// or host), which can even get the same number, so the old registration is never
    /// trusted to still mean this socket.
    private func watchSocket() {
        guard let conn else { return }
        let fd = PQsocket(conn)
        watch?.cancel()
        watch = nil
        guard fd >= 0 else {
            connectionLost("libpq has no socket")
            return
        }
        do throws(EventLoopError) {
            let watch = try loop.watch(
                fd: fd,
                onReadable: { [weak self] in self?.readable() },
                onWritable: { [weak self] in self?.writable() })
            watch.onLoopShutdown = { [weak self] in self?.loopShutDown() }
            if case .connecting = state {
                watch.wantsRead = polling == .reading
                watch.wantsWrite = polling == .writing
            }
            self.watch = watch
        } catch {
            connectionLost("cannot watch the socket: \(error)")
        }
    }

    private func pollConnect() {
        guard let conn, case .connecting = state else { return }
        switch PQconnectPoll(conn) {
        case PGRES_POLLING_READING:
            polling = .reading
            watchSocket()
        case PGRES_POLLING_WRITING:
            polling = .writing
            watchSocket()
        case PGRES_POLLING_OK:
            becomeReady(conn)
        default:
            connectFailed(errorMessage())
        }
    }

    private func becomeReady(_ conn: OpaquePointer) {
        guard PQsetnonblocking(conn, 1) == 0 else {
            connectFailed("cannot make the connection non-blocking: \(errorMessage())")
            return
        }
        guard PQenterPipelineMode(conn) == 1 else {
            connectFailed("cannot enter pipeline mode: \(errorMessage())")
            return
        }
        let completion = connectingCompletion
        state = .ready
        connectTimer?.cancel()
        connectTimer = nil
        watchSocket()
        // Ours until the completion returns; then the caller's (or nobody's).
        let connection = keepAliveWhileConnecting
        keepAliveWhileConnecting = nil
        guard case .ready = state else {
            // The watch could not be made (the loop is shutting down).
            withExtendedLifetime(connection) { completion?(.failure(.connection("cannot watch the connection's socket"))) }
            return
        }
        withExtendedLifetime(connection) { completion?(.success(self)) }
    }

    private func connectFailed(_ message: String) {
        guard case .connecting(let completion) = state else { return }
        state = .closed
        teardown()
        let connection = keepAliveWhileConnecting
        keepAliveWhileConnecting = nil
        // Deferred: this may run inside connect() itself.
        let explained = PostgresConnectHint.explained(message)
        deferred { withExtendedLifetime(connection) { completion(.failure(.connection(explained))) } }
    }

    private func readable() {
        if case .connecting = state {
            if polling == .reading { pollConnect() }
            return
        }
        guard case .ready = state, let conn else { return }
        guard PQconsumeInput(conn) == 1 else {
            connectionLost(errorMessage())
            return
        }
        drainResults()
        guard case .ready = state, let conn = self.conn else { return }
        if PQstatus(conn) == CONNECTION_BAD {
            connectionLost(errorMessage())
        } else if watch?.wantsWrite == true {
            // libpq's advice for a flush that could not finish: read, then flush again.
            flush()
        }
    }

    private func writable() {
        if case .connecting = state {
            if polling == .writing { pollConnect() }
            return
        }
        flush()
    }

    /// Hands libpq's buffered output to the socket; asks for writability while some is left.
    func flush() {
        guard case .ready = state, let conn else { return }
        switch PQflush(conn) {
        case 0: watch?.wantsWrite = false
        case 1: watch?.wantsWrite = true
        default: connectionLost(errorMessage())
        }
    }

    /// Takes every complete result libpq has, in order, and completes a request at each
    /// sync. A completion may make requests, close the connection or drop it: the state is
    /// checked again after each.
    private func drainResults() {
        var nullsInARow = 0
        while !pending.isEmpty, case .ready = state, let conn {
            guard PQisBusy(conn) == 0 else { return }
            guard let result = PQgetResult(conn) else {
                // One NULL ends a statement's results; a second in a row means libpq has
                // nothing more for now, and asking again would spin.
                nullsInARow += 1
                if nullsInARow > 1 { return }
                continue
            }
            nullsInARow = 0
            let outcome = PostgresResultDecoding.outcome(of: result)
            PQclear(result)
            if case .sync = outcome {
                pending.popFirst()?.complete()
            } else {
                pending.recordAtHead(outcome)
            }
        }
    }

    /// The server or the socket is gone: every pending request fails with `.connection`,
    /// then `onClose` runs, all in a later iteration.
    func connectionLost(_ message: String) {
        if case .connecting = state {
            connectFailed(message)
            return
        }
        guard case .ready = state else { return }
        state = .closed
        let orphans = pending.removeAll()
        teardown()
        let error = PostgresError.connection(message)
        deferred { [self] in
            for request in orphans { request.fail(error) }
            let handler = onClose
            onClose = nil
            handler?(error)
        }
    }

    /// The loop is shutting down and will run nothing later: fail everything now.
    private func loopShutDown() {
        let connectCompletion = connectingCompletion
        state = .closed
        let orphans = pending.removeAll()
        watch = nil
        teardown()
        let connection = keepAliveWhileConnecting
        keepAliveWhileConnecting = nil
        let error = PostgresError.connection("the event loop shut down")
        withExtendedLifetime(connection) {
            connectCompletion?(.failure(error))
            for request in orphans { request.fail(error) }
        }
    }
}
