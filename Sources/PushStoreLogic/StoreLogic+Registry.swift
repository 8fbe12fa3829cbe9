import PushWire

/// Registry changes a running store noticed: the change numbers they span and what they
/// did, for its log and metrics.
public struct RegistryNotice: Sendable, Equatable {
    /// The last change noticed before, and the last one now.
    public var from: UInt64
    public var to: UInt64
    public var counts: RegistryChangeCounts

    package init(from: UInt64, to: UInt64, counts: RegistryChangeCounts) {
        self.from = from
        self.to = to
        self.counts = counts
    }
}

/// REGISTRY (SPEC.md 4.16): the gateway's view of the registry, read from the store
/// database by change sequence number.
extension StoreLogic {
    /// The page REGISTRY asks for: `limit` clamped to 1...1000 ([4.16-4]), and no more
    /// than fits the connection's frame.
    public func registryReads(_ request: RegistryRequest, session: StoreSession) -> StoreReads {
        let limit = Int(min(max(request.limit, 1), RegistryRequest.maxLimit))
        return StoreReads(registry: RegistryQuery(cursor: request.cursor, limit: limit, maxBytes: session.maxFrame))
    }

    /// The reply to a held REGISTRY once changes may follow its cursor; nil while none do.
    public func heldRegistryReply(_ read: Result<StoreReadResult, StoreBackendError>) -> Message? {
        switch read {
        case .success(let found):
            guard let page = found.registry, !page.entries.isEmpty else { return nil }
            return .registryOK(RegistryOK(entries: page.entries, cursor: page.cursor, hasMore: page.hasMore))
        case .failure:
            return .error(ErrorReply(status: .internalError, message: "storage error"))
        }
    }

    /// What a held REGISTRY gets when its wait is over, or at once when the store drains
    /// ([4.16-8], [4.16-9]): no entries, the cursor it asked from.
    public static func emptyRegistryReply(_ request: RegistryRequest) -> Message {
        .registryOK(RegistryOK(entries: [], cursor: request.cursor, hasMore: false))
    }
}
