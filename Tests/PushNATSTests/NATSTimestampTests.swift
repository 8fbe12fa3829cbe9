import PushNATS
import Testing

struct NATSTimestampTests {
    @Test("Nats-Time-Stamp in Go's RFC3339Nano, UTC: any number of fraction digits, none included")
    func parses() {
        #expect(NATSTimestamp.unixMilliseconds("1970-01-01T00:00:00Z") == 0)
        #expect(NATSTimestamp.unixMilliseconds("2026-11-29T10:26:28.123456789Z") == 1_795_947_988_123)
        #expect(NATSTimestamp.unixMilliseconds("2026-11-29T10:26:28.5Z") == 1_795_947_988_500)
        #expect(NATSTimestamp.unixMilliseconds("2000-02-29T23:59:59.01Z") == 951_868_799_010)
    }

    @Test("a time stamp of another form is not read")
    func refuses() {
        for text in ["", "2026-11-29T10:26:28+01:00", "2026-13-01T00:00:00Z", "2026-11-29 10:26:28Z", "2026-11-29T10:26:28.Z",
                     "2026-11-29T10:26:28.1234567890Z", "x026-11-29T10:26:28Z"] {
            #expect(NATSTimestamp.unixMilliseconds(text) == nil, "\(text)")
        }
    }
}
