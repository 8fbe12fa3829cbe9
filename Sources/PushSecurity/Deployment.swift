#if canImport(Glibc)
import Glibc
#endif

/// A deployment directory made by `securepush init`: the server key, the provider key, the
/// data keys (`DataKeyFile`) and a config file, each readable by its owner only ([8-6]).
/// `create` makes every file a host of the deployment needs, so that a copy of the
/// directory made right after it serves on another host: nothing a second host would need
/// is made later, on first use.
public struct Deployment: Sendable {
    public static let serverKeyFile = "server.key"
    public static let providerKeyFile = "provider.key"
    public static let configFile = "securepush.conf"

    public let directory: String
    public let serverKey: SecretKey
    public let providerKey: SecretKey
    /// The config file's keys and values, each checked against `ConfigSchema` at open.
    public let config: [String: String]

    public enum Failure: Error, CustomStringConvertible, Equatable {
        case exists(String)
        /// A file that should be there is not.
        case missing(String)
        /// The directory, or its server key, is missing: not made by `securepush init`.
        /// The second value is the path found missing.
        case notADeployment(String, missing: String)
        case unreadable(String, errno: Int32)
        case malformedKey(String)
        case malformedConfig(String, line: Int)
        case unknownKey(String, line: Int, key: String, suggestion: String?)
        case invalidValue(String, line: Int, key: String, value: String, expected: String)
        case duplicateKey(String, line: Int, key: String, firstLine: Int)
        case tooOpen(String)
        case cannotCreate(String, errno: Int32)
        case dataKeys(DataKeyError)

        public var description: String {
            switch self {
            case .exists(let path): "\(path) already exists; refusing to overwrite keys"
            case .missing(let path): "\(path): no such file"
            case .notADeployment(let directory, let missing) where missing == directory:
                "\(directory): no such directory; create the deployment with `securepush init \(directory)`"
            case .notADeployment(let directory, _):
                "\(directory) is not a securepush deployment (no \(Deployment.serverKeyFile)); create one with `securepush init \(directory)`"
            case .unreadable(let path, let code): "cannot read \(path): \(String(cString: strerror(code)))"
            case .malformedKey(let path): "\(path) is not a securepush key (64 hex digits)"
            case .malformedConfig(let path, let line): "\(path):\(line): expected `key = value`"
            case .unknownKey(let path, let line, let key, let suggestion):
                "\(path):\(line): unknown key '\(key)'" + (suggestion.map { "; did you mean '\($0)'?" } ?? "")
            case .invalidValue(let path, let line, let key, let value, let expected):
                "\(path):\(line): \(key) = '\(value)': expected \(expected)"
            case .duplicateKey(let path, let line, let key, let firstLine):
                "\(path):\(line): \(key) is already set on line \(firstLine)"
            case .tooOpen(let path): "\(path) is readable by others; run chmod 600 on it"
            case .cannotCreate(let path, let code): "cannot create \(path): \(String(cString: strerror(code)))"
            case .dataKeys(let error): error.description
            }
        }
    }

    /// What `securepush init` writes: made from `ConfigSchema`, so it names every key.
    public static var defaultConfig: String { ConfigSchema.defaultConfigText }

    /// Creates `directory` with fresh keys (server, provider, the first data key) and the
    /// default config, with `settings` set in it (each checked like a line of the file).
    /// Refuses to overwrite a key.
    public static func create(at directory: String, settings: [(key: String, value: String)] = []) throws -> Deployment {
        for (number, setting) in settings.enumerated() {
            if case .invalidValue(let expected)? = ConfigSchema.problem(name: setting.key, value: setting.value) {
                throw Failure.invalidValue("the command line", line: number + 1, key: setting.key, value: setting.value, expected: expected)
            }
        }
        try makeDirectories(directory)
        for name in [serverKeyFile, providerKeyFile, DataKeyFile.fileName] {
            let path = directory + "/" + name
            if access(path, F_OK) == 0 { throw Failure.exists(path) }
        }
        let server = try SecretKey.generate()
        let provider = try SecretKey.generate()
        try writePrivate(directory + "/" + serverKeyFile, server.fileText)
        try writePrivate(directory + "/" + providerKeyFile, provider.fileText)
        do {
            try DataKeyFile.create(DataKeyFile.path(inDirectory: directory))
        } catch {
            throw Failure.dataKeys(error)
        }
        let configPath = directory + "/" + configFile
        if access(configPath, F_OK) != 0 { try writePrivate(configPath, config(setting: settings)) }
        return try open(directory)
    }

    /// The default config with each of `settings` made an active line: in place of the
    /// key's line (commented out or not), or at the end.
    static func config(setting settings: [(key: String, value: String)]) -> String {
        var lines = defaultConfig.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (key, value) in settings {
            let line = "\(key) = \(value)"
            if let index = lines.firstIndex(where: { $0.hasPrefix("# \(key) = ") || $0.hasPrefix("\(key) = ") }) {
                lines[index] = line
            } else {
                lines.insert(line, at: max(0, lines.count - 1))
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Opens a deployment made by `securepush init`, refusing a config file with unknown
    /// keys, bad values or a key set twice (each error names the file and line).
    public static func open(_ directory: String) throws -> Deployment {
        let serverKeyPath = directory + "/" + serverKeyFile
        for path in [directory, serverKeyPath] where access(path, F_OK) != 0 && errno == ENOENT {
            throw Failure.notADeployment(directory, missing: path)
        }
        let server = try readKey(serverKeyPath)
        let provider = try readKey(directory + "/" + providerKeyFile)
        let configPath = directory + "/" + configFile
        var config: [String: String] = [:]
        if access(configPath, F_OK) == 0 {
            config = try parseConfig(try readFile(configPath), path: configPath)
        }
        return Deployment(directory: directory, serverKey: server, providerKey: provider, config: config)
    }

    /// The `key = value` lines of a config file, each checked against `ConfigSchema`;
    /// `#` starts a comment. `path` is for the errors, which name it and the line.
    public static func parseConfig(_ text: String, path: String) throws -> [String: String] {
        var config: [String: String] = [:]
        var lineOfKey: [String: Int] = [:]
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard content.contains(where: { !$0.isWhitespace }) else { continue }
            guard let equals = content.firstIndex(of: "=") else { throw Failure.malformedConfig(path, line: number) }
            let key = content[..<equals].trimmingCharacters()
            let value = content[content.index(after: equals)...].trimmingCharacters()
            guard !key.isEmpty else { throw Failure.malformedConfig(path, line: number) }
            switch ConfigSchema.problem(name: key, value: value) {
            case .unknownKey(let suggestion)?:
                throw Failure.unknownKey(path, line: number, key: key, suggestion: suggestion)
            case .invalidValue(let expected)?:
                let shown = ConfigSchema.key(named: key).map { ConfigSchema.displayValue(value, of: $0.key.kind) } ?? value
                throw Failure.invalidValue(path, line: number, key: key, value: shown, expected: expected)
            case nil:
                break
            }
            if let first = lineOfKey[key] { throw Failure.duplicateKey(path, line: number, key: key, firstLine: first) }
            lineOfKey[key] = number
            config[key] = value
        }
        return config
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

    /// The value of a key exactly as named, as an integer; nil when the file does not set it.
    public func integer(_ key: String) -> Int? { config[key].flatMap { Int($0) } }

    /// The value a key has for `service`: `SERVICE.key` when the file sets it, else the
    /// bare `key` (which only the keys `ConfigSchema` marks shared may be), else nil. So
    /// `value("listen", for: .store)` reads `store.listen`, and `value("log_level", for:
    /// .gateway)` reads `gateway.log_level`, then `log_level`.
    public func value(_ key: String, for service: ConfigService) -> String? {
        config[service.rawValue + "." + key] ?? config[key]
    }

    /// `value(_:for:)` as an integer (its range was checked at open).
    public func integer(_ key: String, for service: ConfigService) -> Int? {
        value(key, for: service).flatMap { Int($0) }
    }
}

extension Substring {
    func trimmingCharacters() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
