/// How many payload bodies one data key seals.
public struct DataKeyUsage: Sendable, Equatable {
    /// 0 stands for bodies an earlier build stored in clear.
    public var keyID: UInt32
    public var rows: Int
    /// Whether the deployment holds this key (the data-keys file on SQLite, the data_keys
    /// table on PostgreSQL); false: those rows cannot be read.
    public var isHeld: Bool
    public var isCurrent: Bool
    /// A key added but not sealing yet (PostgreSQL): how long until it does.
    public var sealsInMs: UInt64? = nil
    /// How long ago a newer key began to seal (PostgreSQL, where stores take that in within
    /// a refresh); nil when nothing supersedes it, or on SQLite, where the store's writer
    /// reads the file before it seals anything.
    public var supersededAgoMs: UInt64? = nil

    /// Every key held and every key id a row names, with its row count, in id order.
    package static func merge(held: [UInt32], rows: [UInt32: Int], current: UInt32, sealsInMs: [UInt32: UInt64] = [:],
                      supersededAgoMs: [UInt32: UInt64] = [:]) -> [DataKeyUsage] {
        let heldSet = Set(held)
        return heldSet.union(rows.keys).sorted().map {
            DataKeyUsage(keyID: $0, rows: rows[$0] ?? 0, isHeld: heldSet.contains($0), isCurrent: $0 == current,
                         sealsInMs: sealsInMs[$0], supersededAgoMs: supersededAgoMs[$0])
        }
    }

    /// Why `key prune` keeps each key it keeps: every key held, by id, with its reasons
    /// (none for a key it may remove). The one rule of both backends; each then removes a
    /// key only where no row can take it meanwhile.
    public static func keepReasons(_ usage: [DataKeyUsage], settleMs: UInt64,
                                   resealing: DataKeyResealing) -> [(keyID: UInt32, reasons: [DataKeyKeepReason])] {
        let current = usage.first(where: \.isCurrent)?.keyID
        return usage.filter { $0.isHeld && $0.keyID != 0 }.map { key in
            var reasons: [DataKeyKeepReason] = []
            if key.isCurrent {
                reasons.append(.current)
            } else if let sealsIn = key.sealsInMs {
                reasons.append(.notSealingYet(inMs: sealsIn))
            } else if current.map({ key.keyID > $0 }) ?? true {
                // No key known to seal now, or one newer than it: nothing is known to supersede it.
                reasons.append(.notSealingYet(inMs: 0))
            } else {
                if let ago = key.supersededAgoMs, ago < settleMs {
                    reasons.append(.supersededRecently(agoMs: ago, settleMs: settleMs))
                }
                if key.rows > 0 { reasons.append(.sealsPayloads(key.rows, resealing)) }
            }
            return (key.keyID, reasons)
        }
    }

    /// The keys `key prune` removes: those it has no reason to keep.
    public static func prunable(_ usage: [DataKeyUsage], settleMs: UInt64 = 0) -> [UInt32] {
        keepReasons(usage, settleMs: settleMs, resealing: .inBackground).filter(\.reasons.isEmpty).map(\.keyID)
    }
}

/// Where the moving of payloads to the current key stands: what a key that still seals
/// payloads waits for.
public enum DataKeyResealing: Sendable, Equatable {
    /// SQLite: a running store re-seals in the background, between its writes.
    case inBackground
    /// PostgreSQL: passes begin once every store seals under the current key, in this long.
    case startsIn(ms: UInt64)
    /// PostgreSQL: a store is re-sealing now.
    case running
    /// PostgreSQL: a pass is due and none runs: a running store starts one within a second.
    case due
    /// PostgreSQL: the pass for the current key has finished, and left these payloads
    /// (they did not open, or a store of an earlier build sealed them since).
    case finished
}

/// Why `key prune` keeps a key.
public enum DataKeyKeepReason: Sendable, Equatable, CustomStringConvertible {
    /// It seals new payloads.
    case current
    /// Added, not sealing yet (PostgreSQL): every store seals under it from `inMs` on.
    case notSealingYet(inMs: UInt64)
    /// A newer key seals for less than `settleMs` (PostgreSQL): a store may still seal under this one.
    case supersededRecently(agoMs: UInt64, settleMs: UInt64)
    /// Payloads are still sealed under it.
    case sealsPayloads(Int, DataKeyResealing)

    public var description: String {
        switch self {
        case .current:
            return "still current (new payloads are sealed under it)"
        case .notSealingYet(let ms):
            return ms == 0 ? "not sealing yet" : "not sealing yet: every store seals under it from \(seconds(ms)) from now"
        case .supersededRecently(let ago, let settle):
            return "superseded less than \(seconds(settle)) ago (\(seconds(ago, roundingUp: false)) ago): a store may still seal under it; "
                + "it may go from \(seconds(settle - ago)) from now"
        case .sealsPayloads(let rows, let resealing):
            let what = "\(rows) payload\(rows == 1 ? "" : "s") still sealed under it"
            switch resealing {
            case .inBackground:
                return what + ": a running store re-seals them in the background (`key prune --reseal` does it now)"
            case .startsIn(let ms):
                return what + ": re-sealing begins in \(seconds(ms)), once every store seals under the current key"
            case .running:
                return what + ": a store is re-sealing them now"
            case .due:
                return what + ": a running store begins re-sealing them within a second (`key prune --reseal` does it now)"
            case .finished:
                return what + ": the last re-sealing pass left them (they did not open, or a store of an earlier build sealed them)"
            }
        }
    }

    /// `ms` in whole seconds: rounded up (a wait), or down (time passed).
    private func seconds(_ ms: UInt64, roundingUp: Bool = true) -> String {
        let whole = roundingUp ? (ms + 999) / 1000 : ms / 1000
        return "\(whole) second\(whole == 1 ? "" : "s")"
    }
}

/// A key `rotate` added.
public struct DataKeyRotation: Sendable, Equatable {
    public var keyID: UInt32
    /// How long until stores seal under it: 0 on SQLite (each store's next write), the
    /// activation delay on PostgreSQL.
    public var sealsInMs: UInt64

    package init(keyID: UInt32, sealsInMs: UInt64) {
        self.keyID = keyID
        self.sealsInMs = sealsInMs
    }
}

/// `securepush key` on either backend.
public protocol DataKeyAdministering: AnyObject {
    /// Adds a key for new writes; running stores seal under it soon and re-seal older rows
    /// in the background.
    func rotate() throws -> DataKeyRotation
    /// Every key held and every key id a row names, with its row count.
    func usage() throws -> [DataKeyUsage]
    /// Re-seals every row under the current key now; returns the rows that could not be opened.
    func resealAll() throws -> Int
    /// Removes the keys `DataKeyUsage.prunable` names, where that is safe; returns their ids.
    func prune() throws -> [UInt32]
    /// How long a key must have been superseded before it may go (0: at once).
    var settleMs: UInt64 { get }
    /// Where the re-sealing of older payloads stands.
    func resealing() throws -> DataKeyResealing
}

extension DataKeyAdministering {
    /// Every key held with the reasons `key prune` keeps it (none for a key it may remove).
    public func keepReasons() throws -> [(keyID: UInt32, reasons: [DataKeyKeepReason])] {
        DataKeyUsage.keepReasons(try usage(), settleMs: settleMs, resealing: try resealing())
    }
}
