import PushWire

/// Registry changes a running store noticed: the change numbers they span and what they
/// did, for its log and metrics.
public struct RegistryNotice: Sendable, Equatable {
    /// The last change noticed before, and the last one now.
    public var from: UInt64
    public var to: UInt64
    public var counts: RegistryChangeCounts
}

/// REGISTRY (SPEC.md 4.16): the gateway's view of the registry, read from the store
/// database by change sequence number.
extension StoreLogic {
    /// The page REGISTRY asks for: `limit` clamped to 1...1000 ([4.16-4]), and no more
    /// than fits the connection's frame.
    func registryPage(_ request: RegistryRequest, session: StoreSession) throws -> RegistryOK {
        let limit = Int(min(max(request.limit, 1), RegistryRequest.maxLimit))
        let page = try reader.registryChanges(after: request.cursor, limit: limit, maxBytes: session.maxFrame)
        return RegistryOK(entries: page.entries, cursor: page.cursor, hasMore: page.hasMore)
    }

    /// The reply to a held REGISTRY once changes follow its cursor; nil while none do.
    public func heldRegistryReply(_ request: RegistryRequest, session: StoreSession) -> Message? {
        do {
            let page = try reader.withSnapshot { try registryPage(request, session: session) }
            return page.entries.isEmpty ? nil : .registryOK(page)
        } catch {
            return .error(ErrorReply(status: .internalError, message: "storage error"))
        }
    }

    /// What a held REGISTRY gets when its wait is over, or at once when the store drains
    /// ([4.16-8], [4.16-9]): no entries, the cursor it asked from.
    public static func emptyRegistryReply(_ request: RegistryRequest) -> Message {
        .registryOK(RegistryOK(entries: [], cursor: request.cursor, hasMore: false))
    }

    /// The registry changes made since the last call, by this process or another, or nil
    /// if there were none. One `PRAGMA data_version` when nothing was committed.
    public func noticeRegistryChanges() throws -> RegistryNotice? {
        try reader.withSnapshot { () throws -> RegistryNotice? in
            let current = try reader.registrySequence()
            guard current != noticedRegistrySequence else { return nil }
            let counts = try reader.registryChangeCounts(after: noticedRegistrySequence)
            defer { noticedRegistrySequence = current }
            return RegistryNotice(from: noticedRegistrySequence, to: current, counts: counts)
        }
    }
}
