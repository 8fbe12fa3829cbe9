/// A request sent down the pipeline and not yet answered: the outcomes of its statements
/// gathered until its PGRES_PIPELINE_SYNC, then one completion.
///
/// Counting on the sync rather than on libpq's NULL separators is deliberate: a COMMIT that
/// fails at the sync (a deferred constraint) adds an error result the statements did not
/// ask for, and skipped statements still answer (PGRES_PIPELINE_ABORTED).
struct PostgresRequest {
    enum Completion {
        case query((Result<PostgresResult, PostgresError>) -> Void)
        case transaction(statements: Int, (Result<[PostgresResult], PostgresError>) -> Void)
    }

    let completion: Completion
    /// Parses of statements to prepare that lead the segment: their results are not the
    /// statements'.
    var parses = 0
    /// Runs when the request fails, before its completion (forgets what it prepared).
    var onFailure: (() -> Void)?
    private var results: [PostgresResult] = []
    private var firstError: PostgresError?
    private var skipped = 0

    init(_ completion: Completion) {
        self.completion = completion
    }

    mutating func record(_ outcome: StatementOutcome) {
        switch outcome {
        case .result(let result):
            if parses > 0 {
                parses -= 1
            } else {
                results.append(result)
            }
        case .failure(let error): if firstError == nil { firstError = error }
        case .aborted: skipped += 1
        case .sync: break
        }
    }

    /// Runs the completion with what was recorded.
    func complete() {
        if firstError != nil || skipped > 0 { onFailure?() }
        switch completion {
        case .query(let body):
            if let firstError { return body(.failure(firstError)) }
            guard let result = results.first, results.count == 1 else {
                return body(.failure(unexpected(expected: 1)))
            }
            body(.success(result))
        case .transaction(let statements, let body):
            if let firstError { return body(.failure(firstError)) }
            guard results.count == statements else { return body(.failure(unexpected(expected: statements))) }
            body(.success(results))
        }
    }

    func fail(_ error: PostgresError) {
        onFailure?()
        switch completion {
        case .query(let body): body(.failure(error))
        case .transaction(_, let body): body(.failure(error))
        }
    }

    private func unexpected(expected: Int) -> PostgresError {
        if skipped > 0 && results.count + skipped == expected {
            return PostgresError(kind: .server, message: "skipped: the pipeline was aborted by an earlier error")
        }
        return .violation("\(results.count) results where \(expected) were expected")
    }
}

/// First in, first out, without the O(n) of removing an array's first element per answer.
struct PostgresRequestQueue {
    private var items: [PostgresRequest?] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ request: PostgresRequest) {
        items.append(request)
    }

    mutating func recordAtHead(_ outcome: StatementOutcome) {
        guard head < items.count else { return }
        items[head]?.record(outcome)
    }

    mutating func popFirst() -> PostgresRequest? {
        guard head < items.count else { return nil }
        let first = items[head]
        items[head] = nil
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    mutating func removeAll() -> [PostgresRequest] {
        let remaining = items[head...].compactMap { $0 }
        items.removeAll()
        head = 0
        return remaining
    }
}
