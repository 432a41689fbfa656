# Shared set-up for the attack36 reproductions. Source it as root.
set -u
A36=/var/tmp/attack36             # root-owned 0755: kc copied here (pam_kc wants root's file)
KC=$A36/kc
PAMSO=/work/main/.build/pam/pam_kc.so
LOGDIR=/tmp/attack36-logs; mkdir -p $LOGDIR
[ -x $KC ] || { mkdir -p $A36; chmod 755 $A36; install -m 0755 -o root -g root /work/main/.build/release/kc $KC; }

# mkuser NAME PASSWORD: a throwaway user with a home (names start kc-atk-)
mkuser() {
  id "$1" >/dev/null 2>&1 || useradd -m -s /bin/bash "$1"
  echo "$1:$2" | chpasswd
}
# service NAME [budget=..] [extra lines]: /etc/pam.d/kc-atk-NAME, Debian's stack with kc
service() {
  local name=$1; shift; local opts="${1:-}"; shift || true
  cat > /etc/pam.d/kc-atk-$name <<PAM
auth	[success=1 default=ignore]	pam_unix.so nullok
auth	requisite	pam_deny.so
auth	required	pam_permit.so
auth	optional	$PAMSO kc=$KC $opts
account	required	pam_unix.so
password	requisite	pam_unix.so obscure yescrypt
password	optional	$PAMSO kc=$KC $opts
session	optional	pam_keyinit.so force revoke
session	optional	$PAMSO kc=$KC $opts
$*
PAM
}
# inns LOGFILE 'commands': runs commands in a private mount namespace whose /dev/log
# is our own datagram socket; what PAM logged is then in LOGFILE.
inns() {
  local log=$1; shift
  : > $log
  # /dev has no log socket on this machine, and the real /dev must not change: inside
  # the namespace /dev is a new tmpfs with binds of the nodes the tests use.
  unshare --mount --propagation private bash -c '
    d=/tmp/attack36-logs/dev.$$; mkdir -p $d
    mount --rbind /dev $d
    mount -t tmpfs -o mode=755 attack36dev /dev
    for n in null zero full random urandom tty fuse kmsg console; do touch /dev/$n; mount --bind $d/$n /dev/$n; done
    mkdir /dev/pts /dev/shm; mount -t devpts -o newinstance,ptmxmode=0666,mode=620 attack36pts /dev/pts; ln -s pts/ptmx /dev/ptmx; mount --rbind $d/shm /dev/shm
    ln -s /proc/self/fd /dev/fd; ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout; ln -s /proc/self/fd/2 /dev/stderr
    python3 /work/main/Tools/review/attack36/logsink.py /dev/log '"$log"' & sink=$!
    for i in $(seq 50); do [ -S /dev/log ] && break; sleep 0.05; done
    '"$*"'
    rc=$?
    sleep 0.3; kill $sink
    exit $rc'
}
ms() { date +%s%3N; }
