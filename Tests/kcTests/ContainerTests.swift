import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// Secrets handed to real podman containers: the shell secret driver and a read-only
/// single-service mount. Run as root, podman is rootful; run by an ordinary user, it is
/// rootless (its user namespace maps uid 0 to the user), and the same tests must pass.
final class ContainerTests: KeyringTestCase {
    private func driverOptions(_ service: String) throws -> String {
        try kc("podman-driver", "--service", service).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `podman secret create --driver shell` backed by `service`; returns podman's id.
    private func createSecret(_ name: String, in service: String, value: String) throws -> String {
        let created = try Podman.command(["secret", "create", "--driver", "shell", "--driver-opts", driverOptions(service), name, "-"],
                                         input: Array(value.utf8))
        XCTAssertEqual(created.status, 0, "\(created)")
        return created.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testPodmanSecretsLiveInTheKeychain() throws {
        let rootfs = try Podman.rootfs()
        let service = uniqueService()
        let name = "kc-test-\(getpid())-db"
        let id = try createSecret(name, in: service, value: "s3cret")
        defer { _ = try? Podman.command(["secret", "rm", name]) }
        XCTAssertEqual(try Keychain(service: service).string(forKey: id), "s3cret", "the value is an item named by podman's id")
        if Podman.isRootless {
            // The driver ran as uid 0 in podman's user namespace, whose own user keyring
            // (`_uid.0`) nothing outside sees: the service must not be there.
            let inside = try Podman.command(["unshare", "keyctl", "search", "@u", "keyring", "kc:\(service)"])
            XCTAssertNotEqual(inside.status, 0, "nothing stored in the namespace's user keyring: \(inside)")
            XCTAssertEqual(try kc("ls", service).output, id + "\n", "kc ls shows podman's secret")
        }

        let run = try Podman.run(["/bin/sh", "-c", "cat /run/secrets/\(name); echo; echo \"env=$DB\""],
                                 options: ["--secret", name, "--secret", "\(name),type=env,target=DB"], rootfs: rootfs)
        XCTAssertEqual(run.status, 0, "\(run)")
        XCTAssertEqual(run.output, "s3cret\nenv=s3cret\n")

        XCTAssertEqual(try Podman.command(["secret", "rm", name]).status, 0)
        XCTAssertNil(try Keychain(service: service).string(forKey: id), "podman secret rm removes the item")
    }

    func testTheContainersConfSnippetMakesKcTheDefaultDriver() throws {
        _ = try Podman.rootfs()
        let service = uniqueService()
        let conf = NSTemporaryDirectory() + "kc-test-containers-\(getpid()).conf"
        try kc("podman-driver", "--service", service, "--containers-conf").output.write(toFile: conf, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: conf) }
        var environment = ProcessInfo.processInfo.environment
        environment["CONTAINERS_CONF"] = conf
        let name = "kc-test-\(getpid())-default"
        let created = try runCommand("/usr/bin/env", ["podman", "secret", "create", name, "-"], input: Array("by-default".utf8), environment: environment)
        XCTAssertEqual(created.status, 0, "\(created)")
        defer { _ = try? runCommand("/usr/bin/env", ["podman", "secret", "rm", name], environment: environment) }
        let id = created.output.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try Keychain(service: service).string(forKey: id), "by-default")
    }

    func testAVanishedSecretFailsCleanlyAndCanStillBeRemoved() throws {
        let rootfs = try Podman.rootfs()
        let service = uniqueService()
        let name = "kc-test-\(getpid())-gone"
        let id = try createSecret(name, in: service, value: "v")
        try Keychain(service: service).remove(id)  // as a reboot would

        let run = try Podman.run(["/bin/cat", "/run/secrets/\(name)"], options: ["--secret", name], rootfs: rootfs)
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.standardError.contains("kc: podman secret \(id) is not in the keychain"), run.standardError)
        let removed = try Podman.command(["secret", "rm", name])
        XCTAssertEqual(removed.status, 0, "\(removed)")
    }

    func testAReadOnlyServiceMountBoundIntoAContainer() throws {
        let rootfs = try Podman.rootfs()
        let service = uniqueService()
        try Keychain(service: service).set("from-the-host", forKey: "api-token")
        // Rootless podman's containers see its own mount namespace, which a mount made
        // on the host after podman started does not reach: mount inside it instead.
        let mount = try MountFixture(options: ["--read-only", "--service", service], inPodmanNamespace: Podman.isRootless)
        defer { mount.unmount() }
        let run = try Podman.run(["/bin/sh", "-c", """
            ls /run/secrets; cat /run/secrets/api-token; echo
            if printf x > /run/secrets/api-token 2>/dev/null; then echo WRITABLE; else echo refused; fi
            """], options: ["-v", "\(mount.path):/run/secrets:ro"], rootfs: rootfs)
        XCTAssertEqual(run.status, 0, "\(run)")
        XCTAssertEqual(run.output, "api-token\nfrom-the-host\nrefused\n")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "api-token"), "from-the-host")
    }
}
