import ArgumentParser
import PushSecurity
import PushStore
import PushStoreLogic
import PushStorePostgres

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Manage the data keys that encrypt payloads at rest.",
        discussion: """
        Payloads are stored sealed with AES-256-GCM under the current data key. `key rotate` adds a \
        key for new writes; running stores re-seal older payloads under it in the background, in \
        small batches between writes. `key prune` removes the keys no payload uses any more.

        SQLite: the keys are the deployment's data-keys file. A running store notices a new key \
        within a second (a stopped one when it next starts).

        PostgreSQL (store.database set): the keys live in the database, each wrapped (AES-256-GCM) \
        under a key derived (HKDF) from the data-keys file, which every store host holds, identical, \
        from setup on and which never changes. Run the key commands on any host: every store reads \
        the keys each second, and a new key seals only from \(seconds(PostgresDataKeyAdministration.activationDelayMs)) \
        after it was added, so every store knows it before any payload is sealed under it; nothing \
        is copied between hosts. Once it has sealed for \(seconds(PostgresDataKeyAdministration.settleMs)), one store \
        at a time re-seals the older payloads and `key prune` may remove the old key; the database \
        refuses to remove a key any payload still uses.

        """,
        subcommands: [Rotate.self, Status.self, Prune.self])

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a data key; new payloads are sealed under it.")
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            let keys = try openKeys(dataDir)
            let added = try failing { try keys.rotate() }
            let id = added.keyID
            let older = try failing { try keys.usage() }.filter { $0.keyID != id }.reduce(0) { $0 + $1.rows }
            let when = added.sealsInMs == 0 ? "" : ", which every store seals under from \(seconds(added.sealsInMs)) from now"
            announce("added data key \(id)\(when); \(older) payload\(older == 1 ? "" : "s") still under older keys (a running store re-seals them in the background)")
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the data keys and how many payloads each one seals.")
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            let keys = try openKeys(dataDir)
            for key in try failing({ try keys.usage() }) {
                let name = key.keyID == 0 ? "clear" : "\(key.keyID)"
                let notes = [key.isCurrent ? "current" : nil, key.sealsInMs.map { "seals from \(seconds($0)) from now" },
                             key.keyID == 0 ? "stored in clear by an earlier build" : nil,
                             key.isHeld || key.keyID == 0 ? nil : "MISSING from the deployment's keys"].compactMap { $0 }
                announce("key \(name): \(key.rows) payload\(key.rows == 1 ? "" : "s")" + (notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))"))
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the data keys, other than the newest, that no payload uses; name each key kept and why.")
        @Option(help: "The deployment directory.") var dataDir: String
        @Flag(help: "First re-seal every payload under the current key here, instead of waiting for a running store to.")
        var reseal = false

        func run() throws {
            let keys = try openKeys(dataDir)
            if reseal {
                let unreadable = try failing { try keys.resealAll() }
                if unreadable > 0 { announce("\(unreadable) payload\(unreadable == 1 ? "" : "s") could not be opened and keep their key") }
            }
            let removed = try failing { try keys.prune() }
            announce(removed.isEmpty ? "no data key removed" : "removed data key\(removed.count == 1 ? "" : "s") \(removed.map(String.init).joined(separator: ", "))")
            for kept in try failing({ try keys.keepReasons() }) where !removed.contains(kept.keyID) {
                // No reason left: a payload took the key while prune ran, or it settled just now.
                let why = kept.reasons.isEmpty ? ["it was in use while prune ran; prune again"] : kept.reasons.map(\.description)
                announce("kept data key \(kept.keyID): " + why.joined(separator: "; "))
            }
        }
    }
}

private func openKeys(_ dataDir: String) throws -> DataKeyAdministering {
    let deployment = try openDeployment(dataDir)
    return try failing { try StoreDatabase(deployment).dataKeys(directory: deployment.directory) }
}

/// `body`, its error as the command's message.
private func failing<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw CommandFailure("\(error)")
    }
}

private func seconds(_ ms: UInt64) -> String {
    let whole = (ms + 999) / 1000
    return "\(whole) second\(whole == 1 ? "" : "s")"
}
