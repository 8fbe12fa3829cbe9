@testable import PushSealing
import PushWire
import Testing

@Suite struct DeviceKeyPairTests {
    /// [7.5-6] The file is one line: suite digit, space, lowercase hex, newline; it reads back to the same pair.
    @Test(arguments: KeySuite.allCases)
    func fileRoundTrip(suite: KeySuite) throws {
        let pair = try DeviceKeyPair.generate(suite: suite)
        #expect(pair.suite == suite)
        #expect(pair.publicKey.count == suite.publicKeyCount)
        #expect(pair.privateKeyBytes.count == 32)
        #expect(pair.fileText == "\(suite.rawValue) \(pair.privateKeyBytes.hexString)\n")
        let read = try DeviceKeyPair(fileText: pair.fileText)
        #expect(read.suite == suite)
        #expect(read.publicKey == pair.publicKey)
        #expect(read.keyID(deviceID: "phone") == pair.keyID(deviceID: "phone"))
        // The final newline is optional (an editor may drop it).
        #expect(try DeviceKeyPair(fileText: String(pair.fileText.dropLast())).publicKey == pair.publicKey)
    }

    /// [7.5-6] Suite 1 stores the X25519 scalar: RFC 7748 6.1's Alice key gives her public key.
    @Test func x25519FromRFC7748() throws {
        let pair = try DeviceKeyPair(fileText: "1 77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a\n")
        #expect(pair.publicKey == (try hexBytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")))
    }

    /// [7.5-6] Suite 2 stores X-Wing's 32-byte seed: the draft's first vector gives its public key.
    @Test func xwingFromSeed() throws {
        let vectors = try XWingVectors.load()
        let first = try #require(vectors.first)
        let pair = try DeviceKeyPair(fileText: "2 \(first.seed)\n")
        #expect(pair.publicKey == (try hexBytes(first.pk)))
    }

    @Test func malformedFiles() {
        let key = String(repeating: "ab", count: 32)
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1\(key)\n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1  \(key)\n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1 \(key)\n\n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1 \(key) \n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1 \(key.dropLast())\n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1 zz\(key.dropFirst(2))\n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "1 \n") }
        #expect(throws: SealingError.keyFileSyntax) { try DeviceKeyPair(fileText: "10 \(key)\n") }
        #expect(throws: SealingError.keyFileSuite("3")) { try DeviceKeyPair(fileText: "3 \(key)\n") }
        #expect(throws: SealingError.keyFileSuite("0")) { try DeviceKeyPair(fileText: "0 \(key)\n") }
        #expect(throws: SealingError.keyFileSuite("x")) { try DeviceKeyPair(fileText: "x \(key)\n") }
        #expect(throws: SealingError.keyFileKey(suite: .x25519, bytes: 31)) { try DeviceKeyPair(fileText: "1 \(key.dropLast(2))\n") }
        #expect(throws: SealingError.keyFileKey(suite: .xwing, bytes: 33)) { try DeviceKeyPair(fileText: "2 \(key)cd\n") }
        #expect(throws: SealingError.keyFileKey(suite: .xwing, bytes: 64)) { try DeviceKeyPair(fileText: "2 \(key)\(key)\n") }
    }
}
