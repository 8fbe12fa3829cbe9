import Foundation
import Testing
import PushWire
@testable import PushSecurity

private func hex(_ text: String) -> [UInt8] { [UInt8](hex: text) ?? [] }

@Suite("AES-256-GCM")
struct AESGCMTests {
    // Test Case 16 of McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)":
    // AES-256, a 96-bit IV, 60 bytes of plaintext and 20 of associated data.
    let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
    let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
    let associated = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
    let nonce = hex("cafebabefacedbaddecaf888")
    let ciphertext = hex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
    let tag = hex("76fc6ece0f4e1768cddf8853bb2d551b")

    @Test("seals and opens the published vector (GCM test case 16)")
    func knownAnswer() throws {
        let cipher = try AES256GCM(key: key)
        let sealed = try cipher.seal(plaintext, associatedData: associated, nonce: nonce)
        #expect(sealed == nonce + ciphertext + tag)
        #expect(try cipher.open(nonce + ciphertext + tag, associatedData: associated) == plaintext)
    }

    @Test("a flipped bit anywhere, other associated data, another key or a cut refuse to open")
    func refusals() throws {
        let cipher = try AES256GCM(key: key)
        let sealed = nonce + ciphertext + tag
        for index in [0, 11, 12, 40, sealed.count - 16, sealed.count - 1] {
            var flipped = sealed
            flipped[index] ^= 0x01
            #expect(throws: CipherError.authenticationFailed) { try cipher.open(flipped, associatedData: self.associated) }
        }
        #expect(throws: CipherError.authenticationFailed) { try cipher.open(sealed, associatedData: Array(self.associated.dropLast())) }
        #expect(throws: CipherError.authenticationFailed) { try AES256GCM(key: Array(repeating: 7, count: 32)).open(sealed, associatedData: self.associated) }
        #expect(throws: CipherError.authenticationFailed) { try cipher.open(Array(sealed.dropLast()), associatedData: self.associated) }
        #expect(throws: CipherError.truncated) { try cipher.open(Array(sealed.prefix(27)), associatedData: []) }
        #expect(throws: CipherError.badKeyLength) { try AES256GCM(key: Array(repeating: 1, count: 16)) }
    }

    @Test("nonces drawn in batches never repeat, across refills of the batch")
    func noncesAcrossRefills() throws {
        let cipher = try AES256GCM(key: key)
        var seen = Set<[UInt8]>()
        for _ in 0..<1_000 {
            let sealed = try cipher.seal([1], associatedData: [])
            #expect(seen.insert(Array(sealed.prefix(AES256GCM.nonceByteCount))).inserted)
            #expect(try cipher.open(sealed, associatedData: []) == [1])
        }
    }

    @Test("each seal takes a fresh nonce; an empty plaintext round-trips")
    func freshNonces() throws {
        let cipher = try AES256GCM(key: key)
        let first = try cipher.seal(plaintext, associatedData: [])
        let second = try cipher.seal(plaintext, associatedData: [])
        #expect(first.prefix(12) != second.prefix(12))
        #expect(first != second)
        let empty = try cipher.seal([], associatedData: [1, 2])
        #expect(empty.count == AES256GCM.overhead)
        #expect(try cipher.open(empty, associatedData: [1, 2]) == [])
    }
}

/// A scratch directory for a data-keys file, removed on deinit.
final class KeyDirectory {
    let path: String
    var keys: String { DataKeyFile.path(inDirectory: path) }

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("data-keys-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func mode(_ file: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) ?? -1
    }

    func write(_ text: String, mode: Int = 0o600) throws {
        try text.write(toFile: keys, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: keys)
    }
}

@Suite("Data keys file")
struct DataKeyFileTests {
    @Test("created on first use, owner-only, with key 1; rotation adds 2 and keeps 1")
    func createAndAdd() throws {
        let directory = try KeyDirectory()
        let first = try DataKeyFile.readOrCreate(directory.keys)
        #expect(first.map(\.id) == [1])
        #expect(try directory.mode(directory.keys) == 0o600)
        #expect(try DataKeyFile.readOrCreate(directory.keys) == first, "a second use reads, not replaces")
        let added = try DataKeyFile.add(directory.keys)
        #expect(added.id == 2)
        #expect(try DataKeyFile.read(directory.keys) == first + [added])
        #expect(try directory.mode(directory.keys) == 0o600)
    }

    @Test("pruning never removes the newest key and asks about the others")
    func prune() throws {
        let directory = try KeyDirectory()
        _ = try DataKeyFile.readOrCreate(directory.keys)
        _ = try DataKeyFile.add(directory.keys)
        _ = try DataKeyFile.add(directory.keys)
        var asked: [UInt32] = []
        let removed = try DataKeyFile.remove(directory.keys) { key in
            asked.append(key.id)
            return true
        }
        #expect(asked == [1, 2])
        #expect(removed == [1, 2])
        #expect(try DataKeyFile.read(directory.keys).map(\.id) == [3])
    }

    @Test("refuses a file others may read, a malformed line, a repeated id and an empty file")
    func refusals() throws {
        let directory = try KeyDirectory()
        let line = "1 " + String(repeating: "ab", count: 32) + "\n"
        try directory.write(line, mode: 0o644)
        #expect(throws: DataKeyError.tooOpen(directory.keys)) { try DataKeyFile.read(directory.keys) }
        try directory.write("1 abcd\n")
        #expect(throws: DataKeyError.malformed(directory.keys, line: 1)) { try DataKeyFile.read(directory.keys) }
        try directory.write("# comment\n" + line + line)
        #expect(throws: DataKeyError.malformed(directory.keys, line: 3)) { try DataKeyFile.read(directory.keys) }
        try directory.write("0 " + String(repeating: "ab", count: 32) + "\n")
        #expect(throws: DataKeyError.malformed(directory.keys, line: 1)) { try DataKeyFile.read(directory.keys) }
        try directory.write("# nothing\n")
        #expect(throws: DataKeyError.noKeys(directory.keys)) { try DataKeyFile.read(directory.keys) }
        #expect(throws: DataKeyError.missing(directory.path + "/nope")) { try DataKeyFile.read(directory.path + "/nope") }
    }

    @Test("rotations racing from several threads each get their own key, none lost")
    func concurrentRotations() async throws {
        let directory = try KeyDirectory()
        let path = directory.keys
        let ids = try await withThrowingTaskGroup(of: UInt32.self) { group in
            for _ in 0..<8 { group.addTask { try DataKeyFile.add(path).id } }
            var ids: [UInt32] = []
            for try await id in group { ids.append(id) }
            return ids
        }
        #expect(Set(ids).count == 8)
        #expect(try DataKeyFile.read(path).map(\.id) == Array(1...8))
    }

    @Test("a ring notices a key another process added, and opens what that key sealed")
    func ringRefresh() throws {
        let directory = try KeyDirectory()
        let ring = try DataKeyRing(path: directory.keys)
        let other = try DataKeyRing(path: directory.keys)
        #expect(ring.currentID == 1)
        #expect(try ring.refreshIfChanged() == false)
        _ = try DataKeyFile.add(directory.keys)
        #expect(try other.refreshIfChanged())
        let sealed = try other.current.seal([1, 2, 3], associatedData: [9])
        #expect(ring.currentID == 1, "not read again until asked")
        #expect(try ring.cipher(for: 2)?.open(sealed, associatedData: [9]) == [1, 2, 3], "an unknown key id reads the file again")
        #expect(ring.currentID == 2)
        #expect(ring.cipher(for: 7) == nil)
    }

    @Test("a wrapped data key opens only under the file key that wrapped it and only as its own id; a ring of supplied keys seals under the one it is told")
    func wrapping() throws {
        let file = try [DataKeyFile.fresh(id: 1), DataKeyFile.fresh(id: 2)]
        let wrapping = try DataKeyWrapping(fileKeys: file)
        let key = try DataKeyFile.fresh(id: 7)
        let (wrappedBy, sealed) = try wrapping.wrap(key)
        #expect(wrappedBy == 2, "the file's newest key wraps")
        #expect(try wrapping.unwrap(id: 7, wrappedBy: 2, sealed: sealed) == key)
        #expect(throws: DataKeyError.unwrapFailed(id: 8, wrappedBy: 2), "not under another id") {
            try wrapping.unwrap(id: 8, wrappedBy: 2, sealed: sealed)
        }
        #expect(throws: DataKeyError.unwrapFailed(id: 7, wrappedBy: 1), "not under another file key") {
            try wrapping.unwrap(id: 7, wrappedBy: 1, sealed: sealed)
        }
        let otherFile = try DataKeyWrapping(fileKeys: [DataKeyFile.fresh(id: 1), DataKeyFile.fresh(id: 2)])
        #expect(throws: DataKeyError.unwrapFailed(id: 7, wrappedBy: 2), "not with another host's file") {
            try otherFile.unwrap(id: 7, wrappedBy: 2, sealed: sealed)
        }
        #expect(throws: DataKeyError.wrappingKeyMissing(id: 7, wrappedBy: 2)) {
            try DataKeyWrapping(fileKeys: [file[0]]).unwrap(id: 7, wrappedBy: 2, sealed: sealed)
        }

        let ring = try DataKeyRing(keys: [file[0], key], current: 1)
        #expect(ring.currentID == 1 && ring.path == nil)
        try ring.install([file[0], key], current: 7)
        #expect(ring.currentID == 7 && ring.keyIDs == [1, 7])
        #expect(try ring.refreshIfChanged() == false)
        #expect(throws: DataKeyError.noKeys("the database's data_keys")) { try ring.install([file[0]], current: 7) }
        #expect(ring.currentID == 7, "a refused install changes nothing")
    }
}
