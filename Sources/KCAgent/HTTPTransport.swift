import CCurl

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How the agent reaches OpenBao: the server's CA, an optional client certificate.
public struct TLSSettings: Sendable, Equatable {
    /// The CA that must have signed the server's certificate (PEM). Nil: the system's CAs.
    public var caFile: String?
    public var clientCertificate: String?
    public var clientKey: String?

    public init(caFile: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }
}

/// An HTTP response: status and body. The body may hold secrets: ``wipe()`` it.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var body: [UInt8]

    public mutating func wipe() {
        for index in body.indices { body[index] = 0 }
        body = []
    }
}

/// A request that got no HTTP answer: the connection, TLS or a timeout failed.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var address: String
    public var reason: String
    public var description: String { "\(address): \(reason)" }
}

/// One libcurl handle, kept for the agent's life so that its connections stay open
/// (a poll is then one request on a warm connection, not a TCP and TLS handshake).
/// Not thread-safe: the agent's loop is its only user.
public final class HTTPTransport {
    private let handle: UnsafeMutableRawPointer
    private let tls: TLSSettings
    /// libcurl writes a failure's detail here (it keeps the pointer: not a Swift array).
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    private static let initialized: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    public init(tls: TLSSettings, timeoutMilliseconds: Int = 5000) {
        _ = Self.initialized
        guard let handle = curl_easy_init() else { fatalError("kc-agent: libcurl could not make a handle (out of memory)") }
        self.handle = handle
        self.tls = tls
        _ = kc_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = kc_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, 2000)
        _ = kc_curl_set_long(handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
        _ = kc_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = kc_curl_set_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        _ = kc_curl_set_long(handle, CURLOPT_SSL_VERIFYPEER, 1)
        _ = kc_curl_set_long(handle, CURLOPT_SSL_VERIFYHOST, 2)
        _ = kc_curl_set_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        if let caFile = tls.caFile {
            // Only this CA: not the system's as well.
            _ = kc_curl_set_string(handle, CURLOPT_CAINFO, caFile)
            _ = kc_curl_set_pointer(handle, CURLOPT_CAPATH, nil)
        }
        if let certificate = tls.clientCertificate { _ = kc_curl_set_string(handle, CURLOPT_SSLCERT, certificate) }
        if let key = tls.clientKey { _ = kc_curl_set_string(handle, CURLOPT_SSLKEY, key) }
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        _ = kc_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer))
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Sends one request and returns the answer, whatever its status.
    public func send(_ method: String, _ url: String, headers: [String], body: [UInt8]?) throws(TransportError) -> HTTPResponse {
        let sink = ResponseSink()
        let context = Unmanaged.passUnretained(sink).toOpaque()
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for header in headers + ["Content-Type: application/json", "Expect:"] { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        errorBuffer[0] = 0
        _ = kc_curl_set_string(handle, CURLOPT_URL, url)
        _ = kc_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))
        _ = kc_curl_set_write_callback(handle) { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            // No answer of OpenBao's is this big: a server that sends more is cut off
            // (returning less than given makes libcurl fail the transfer).
            guard sink.bytes.count + size * count <= ResponseSink.limit else { return 0 }
            sink.bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size * count))
            return size * count
        }
        _ = kc_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)
        var payload = body ?? []
        defer { for index in payload.indices { payload[index] = 0 } }
        let code: CURLcode = payload.withUnsafeBytes { bytes in
            if method == "GET" {
                _ = kc_curl_set_long(handle, CURLOPT_HTTPGET, 1)
                _ = kc_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, nil)
            } else {
                _ = kc_curl_set_long(handle, CURLOPT_POST, 1)
                _ = kc_curl_set_post_size(handle, bytes.count)
                _ = kc_curl_set_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                _ = kc_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, nil)
                if method != "POST" { _ = kc_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, method) }
            }
            return curl_easy_perform(handle)
        }
        _ = kc_curl_set_pointer(handle, CURLOPT_POSTFIELDS, nil)
        guard code == CURLE_OK else {
            for index in sink.bytes.indices { sink.bytes[index] = 0 }
            let detail = String(cString: errorBuffer)
            let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            throw TransportError(address: url, reason: Self.withoutTiming(reason))
        }
        return HTTPResponse(status: kc_curl_response_code(handle), body: sink.bytes)
    }
}

extension HTTPTransport {
    /// libcurl's message without the time it took ("Failed to connect to ... after 3 ms:
    /// ..."), so that one outage reads the same at every poll and is said once.
    static func withoutTiming(_ message: String) -> String {
        var words = message.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        var index = 0
        while index + 2 < words.count {
            if words[index] == "after", Int(words[index + 1]) != nil, words[index + 2].hasPrefix("ms") {
                let rest = String(words[index + 2].dropFirst(2))  // "ms:" keeps its ':'
                words.removeSubrange(index...(index + 2))
                if !rest.isEmpty, index > 0 { words[index - 1] += rest }
                continue
            }
            index += 1
        }
        return words.joined(separator: " ")
    }
}

private final class ResponseSink {
    /// The most of one answer kept: 8 MiB (a KV secret holds at most what kc can: its
    /// keys' values of up to 32767 bytes each).
    static let limit = 8 << 20
    var bytes: [UInt8] = []
}
