import PushEventLoop
import PushPostgres
import PushStoreLogic

/// Coalesces the reads of FETCH, ACK, STATUS and RECALL (`PostgresReadStatement.batches`)
/// into one statement per batch (`PostgresReadStatement.batch`): the reads that arrive in
/// one turn of the loop go together, and so do those that arrive while `maxInFlight`
/// batches are at the server, up to `maxBatch`. The server's cost per statement is most of
/// a single-row read's, so this is what makes a FETCH cheap there.
///
/// A batch that fails (the connection lost, a statement error) fails its own requests and
/// no others; a row that cannot be read (a body that does not open) fails its request
/// alone. Loop-confined.
final class PostgresReadBatch {
    typealias Completion = (Result<StoreReadResult, StoreBackendError>) -> Void
    /// Sends a statement on a read connection, or fails it when there is none.
    typealias Send = (_ statement: PostgresStatement, _ done: @escaping (Result<PostgresResult, PostgresError>) -> Void) -> Void

    private struct Waiting {
        var reads: StoreReads
        var completion: Completion
    }

    /// Requests per statement at most.
    static let maxBatch = 256
    /// Batches at the server at once: while one runs, the next gathers.
    static let maxInFlight = 2

    private let loop: EventLoop
    private let send: Send
    private let open: PostgresReadStatement.Opener
    private var queue: [Waiting] = []
    private var inFlight = 0
    private var flushScheduled = false
    /// Batches sent and requests in them, for tests and measurements.
    private(set) var batchesSent = 0
    private(set) var requestsSent = 0

    init(loop: EventLoop, open: @escaping PostgresReadStatement.Opener, send: @escaping Send) {
        self.loop = loop
        self.open = open
        self.send = send
    }

    func read(_ reads: StoreReads, completion: @escaping Completion) {
        queue.append(Waiting(reads: reads, completion: completion))
        if queue.count >= PostgresReadBatch.maxBatch, inFlight < PostgresReadBatch.maxInFlight {
            sendNext()
        } else {
            scheduleFlush()
        }
    }

    /// At the end of this turn of the loop, so that a burst of input goes as one batch.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            flushScheduled = false
            while !queue.isEmpty, inFlight < PostgresReadBatch.maxInFlight { sendNext() }
        }
    }

    private func sendNext() {
        let batch = Array(queue.prefix(PostgresReadBatch.maxBatch))
        queue.removeFirst(batch.count)
        inFlight += 1
        batchesSent += 1
        requestsSent += batch.count
        let statement = PostgresReadStatement.batch(batch.map(\.reads))
        send(PostgresStatement(statement.sql, statement.parameters, prepared: true)) { [weak self] result in
            self?.inFlight -= 1
            PostgresReadBatch.deliver(batch, result, statement: statement, open: self?.open)
            guard let self else { return }
            if !queue.isEmpty, inFlight < PostgresReadBatch.maxInFlight { sendNext() }
        }
    }

    private static func deliver(_ batch: [Waiting], _ result: Result<PostgresResult, PostgresError>, statement: PostgresReadStatement,
                                open: PostgresReadStatement.Opener?) {
        let rows: PostgresResult
        switch result {
        case .failure(let error):
            for waiting in batch { waiting.completion(.failure(StoreBackendError(error))) }
            return
        case .success(let found):
            rows = found
        }
        guard let open else {
            for waiting in batch { waiting.completion(.failure(StoreBackendError("the store is stopping"))) }
            return
        }
        // Row of each request by its ordinal; a request the rows do not name fails alone.
        var rowOf = [Int?](repeating: nil, count: batch.count)
        for row in rows.rows.indices {
            if let ordinal = try? rows.int64(row, 0), ordinal >= 1, ordinal <= Int64(batch.count) { rowOf[Int(ordinal) - 1] = row }
        }
        for (index, waiting) in batch.enumerated() {
            guard let row = rowOf[index] else {
                waiting.completion(.failure(StoreBackendError("the batched read returned no row for request \(index + 1)")))
                continue
            }
            do {
                waiting.completion(.success(try statement.decode(rows, row: row, reads: waiting.reads, open: open)))
            } catch {
                waiting.completion(.failure(StoreBackendError(error)))
            }
        }
    }
}
