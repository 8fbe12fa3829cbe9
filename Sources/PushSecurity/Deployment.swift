#if canImport(Glibc)
import Glibc
#endif

/// A deployment directory made by `securepush init`: the server key, the provider key and
/// a config file, each readable by its owner only ([8-6]).
public struct Deployment: Sendable {
    public static let serverKeyFile = "server.key"
    public static let providerKeyFile = "provider.key"
    public static let configFile = "securepush.conf"

    public let directory: String
    public let serverKey: SecretKey
    public let providerKey: SecretKey
    public let config: [String: String]

    public enum Failure: Error, CustomStringConvertible, Equatable {
        case exists(String)
        case missing(String)
        case unreadable(String, errno: Int32)
        case malformedKey(String)
        case malformedConfig(String, line: Int)
        case tooOpen(String)
        case cannotCreate(String, errno: Int32)

        public var description: String {
            switch self {
            case .exists(let path): "\(path) already exists; refusing to overwrite keys"
            case .missing(let path): "\(path) not found; create the deployment with `securepush init DIR`"
            case .unreadable(let path, let code): "cannot read \(path): \(String(cString: strerror(code)))"
            case .malformedKey(let path): "\(path) is not a securepush key (64 hex digits)"
            case .malformedConfig(let path, let line): "\(path):\(line): expected `key = value`"
            case .tooOpen(let path): "\(path) is readable by others; run chmod 600 on it"
            case .cannotCreate(let path, let code): "cannot create \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    public static let defaultConfig = """
    # securepush deployment configuration: `key = value`; command-line flags win.
    store.listen = 127.0.0.1:7070
    gateway.listen = 127.0.0.1:7071
    # largest payload a STORE may carry, in bytes
    store.max_payload_bytes = 4096
    # fetch token lifetime, in seconds
    store.token_lifetime_s = 3600
    # PBKDF2-HMAC-SHA256 iterations for new password hashes
    password.iterations = 210000
    # connection deadlines and pending-handshake caps, per service (store., gateway.) or
    # for both (the bare key); the defaults:
    # handshake_timeout_ms = 5000
    # frame_timeout_ms = 10000
    # max_pending_handshakes = 1024
    # max_pending_per_address = 64

    """

    /// Creates `directory` with fresh keys and the default config. Refuses to overwrite.
    public static func create(at directory: String) throws -> Deployment {
        try makeDirectories(directory)
        for name in [serverKeyFile, providerKeyFile] {
            let path = directory + "/" + name
            if access(path, F_OK) == 0 { throw Failure.exists(path) }
        }
        let server = try SecretKey.generate()
        let provider = try SecretKey.generate()
        try writePrivate(directory + "/" + serverKeyFile, server.fileText)
        try writePrivate(directory + "/" + providerKeyFile, provider.fileText)
        let configPath = directory + "/" + configFile
        if access(configPath, F_OK) != 0 { try writePrivate(configPath, defaultConfig) }
        return try open(directory)
    }

    public static func open(_ directory: String) throws -> Deployment {
        let server = try readKey(directory + "/" + serverKeyFile)
        let provider = try readKey(directory + "/" + providerKeyFile)
        let configPath = directory + "/" + configFile
        var config: [String: String] = [:]
        if access(configPath, F_OK) == 0 {
            for (index, line) in try readFile(configPath).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let text = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                guard text.contains(where: { !$0.isWhitespace }) else { continue }
                let parts = text.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters() }
                guard parts.count == 2, !parts[0].isEmpty else { throw Failure.malformedConfig(configPath, line: index + 1) }
                config[parts[0]] = parts[1]
            }
        }
        return Deployment(directory: directory, serverKey: server, providerKey: provider, config: config)
    }

    public static func readKey(_ path: String) throws -> SecretKey {
        let text = try readFile(path)
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 { throw Failure.tooOpen(path) }
        guard let key = SecretKey(fileText: text) else { throw Failure.malformedKey(path) }
        return key
    }

    public static func readFile(_ path: String) throws -> String {
        guard let file = fopen(path, "r") else {
            throw errno == ENOENT ? Failure.missing(path) : Failure.unreadable(path, errno: errno)
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Creates `path` and any missing parents (like `mkdir -p`); the directories it makes
    /// are owner-only. An existing directory is fine; anything else in the way is an error.
    public static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw Failure.cannotCreate(prefix, errno: errno)
            }
            prefix += "/"
        }
        var info = stat()
        guard stat(path, &info) == 0 else { throw Failure.cannotCreate(path, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw Failure.cannotCreate(path, errno: ENOTDIR) }
    }

    /// Writes a file only its owner can read, replacing any earlier one atomically.
    public static func writePrivate(_ path: String, _ text: String) throws {
        let temporary = path + ".tmp"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure.cannotCreate(temporary, errno: errno) }
        fchmod(fd, 0o600)
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        Glibc.close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw Failure.unreadable(path, errno: errno)
        }
    }

    public func integer(_ key: String) -> Int? { config[key].flatMap { Int($0) } }
}

extension Substring {
    func trimmingCharacters() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
