/// The store's messages (sections 4.1, 4.6 to 4.12, 8): roles, LOGIN, STORE, FETCH,
/// SYNC, ACK, RECALL and STATUS with each of their statuses. The lists live in one file
/// per concern; `rateLimit` runs last (see `ConformanceSuite.catalogue`).
enum StoreCases {
    static let all: [ConformanceCase] = roles + logins + storing + reading + receipts
}
