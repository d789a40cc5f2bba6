// LibvirtHost: the real VmHost, QEMU domains through the libvirt C API (never virsh).
// Each VM is a persistent domain "warren-<id>" (so it survives a warren restart) plus a
// directory DATA/vms/<id> managed as a libvirt dir storage pool of the same name:
//   seed.img      read-only first-boot seed (seed_image.h)
//   console.log   the serial console, appended by virtlogd
//   control.sock  host end of the warren.control virtio-serial port
// Disks live apart, in DATA/disks, because `cp` shares them between VMs: each VM's disk is
// a chain of qcow2 layers kept by DiskChains (disk_chains.h: which layers are in use, their
// collection after every Destroy, flattening). Copy freezes the source's top and puts a
// fresh overlay over it for both VMs. The XML this host writes is domain_xml.h's, what it
// reads back is parsed by libvirt_xml.h. Disks and seed go through the storage API (volume
// create, stream upload).
//
// Remote hosts (libvirt_uri.h: a URI naming a host or a transport other than the local
// socket, e.g. qemu+ssh://root@h2/system, qemu+tls://h3/system): DATA is a directory on that
// host, reached only through libvirt's API, never this machine's file system (the remote
// parts are in libvirt_host_remote.cc). There:
//   - images come from the host's own store, DATA/images there (host_image_store.h): a
//     version the host lacks is uploaded from the local catalog (options.images_dir) with
//     virStorageVolUpload before a Create or Copy uses it, once however many ask at once;
//   - DATA/vms is a dir pool "<prefix>vms-<hash>" too, so a VM's directory is listed and
//     removed (rmdir of its volume) through the API; the seed is built here, in scratch_dir;
//   - the disk's free space is the images pool's (virStoragePoolGetInfo), not statvfs;
//   - templates live in DATA/templates there as volumes of a pool (a save image and its
//     description each), and a clone is restored from a copy of the save made on that host
//     with its header rewritten in place (libvirt_host_remote_templates.cc); a live copy's
//     snapshot writes the source's memory into the copy's own directory there, where it is
//     restored the same way, in place (libvirt_host_live_copy.cc, live_copy_memory.h);
//   - the accelerator is what libvirt reports there (libvirt_accel_probe.h), TCG unless
//     forced, and warren never starts or restarts a remote daemon.
//
// Files and QEMU's user: when the daemon names the user QEMU runs as (its DAC model), every
// per-VM file is created owned by that user and domains say relabel='no', so libvirt never
// changes an owner: the files many VMs share (an image's kernel, initrd, rootfs, frozen disk
// layers) are only read, and an image is made readable by everyone once, at its first use.
// Admission: Create, Copy, Resize and Start check the host's room (CheckHostRoom) against
// what its VMs hold, not only what is free at the moment; every domain gets a <cputune>.
//
// Thread-safe: libvirt connections are thread-safe and shared; operations on one VM are
// serialised by a per-VM lock, operations on different VMs run in parallel. Whatever
// creates or deletes disk files (Create, Copy, Destroy, the collection) also holds the disk
// chains' lock, taken after the VM locks (a Copy takes both VMs' locks, in id order), so a
// collection never sees a file half-way to its VM. The connection's and the lock table's
// own mutexes are leaves: held briefly, never while taking another. WatchStates adds two
// threads (libvirt_events.h: the process's event loop; the host's VmStateDelivery) and a
// watch mutex taken before the delivery's and never while it calls the listener.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lobby/base/unique_fd.h"
#include "vmhost/disk_chains.h"
#include "vmhost/domain_xml.h"
#include "vmhost/guest_image.h"
#include "vmhost/host_image_store.h"
#include "vmhost/kvm_probe.h"
#include "vmhost/libvirt_domain_ops.h"
#include "vmhost/libvirt_events.h"
#include "vmhost/libvirt_handles.h"
#include "vmhost/libvirtd_launcher.h"
#include "vmhost/reconnector.h"
#include "vmhost/template_file.h"
#include "vmhost/vm_host.h"
#include "vmhost/vm_state_delivery.h"
#include "vmhost/warm_memory.h"

namespace warren {

struct SaveImageHeader;

struct LibvirtHostOptions {
  std::string uri = "qemu:///system";
  // The URI another host's libvirtd opens to reach this one: a live move onto this host is a
  // peer-to-peer migration its source's daemon drives. Empty: none (a move here from another
  // machine's host is refused).
  std::string peer_uri;
  // Under qemu:///system QEMU runs as libvirt-qemu: the data directory must be reachable by
  // that user (not inside a 0700 home). For a remote URI, a path on that host.
  std::string data_dir = "/var/lib/warren";
  // warren's image catalog, on this machine (image_layout.h). A local host boots from it
  // directly; a remote one gets copies in its own store, DATA/images there.
  std::string images_dir = "/var/lib/warren/images";
  // Local scratch for building seeds and host keys. Empty: DATA/tmp for a local host, the
  // system's temporary directory for a remote one (whose DATA is not here).
  std::string scratch_dir;
  Accel accel = Accel::kTcg;
  // TCG's translation cache per domain, MiB (domain_xml.h); 0: QEMU's default.
  int tb_cache_mib = kTcgTbCacheMib;
  // How long Stop and Restart wait for a guest to power off by itself before pulling the plug.
  std::chrono::milliseconds stop_timeout{30000};
  std::string mkfs = "mkfs.ext4";
  // Domains (and their pools) are "<prefix><id>"; List sees only this prefix. Tests use
  // their own so they never touch, or count, anyone else's VMs.
  std::string domain_prefix = "warren-";
  // A local host only, optional, not owned (shared by the machine's local hosts): memory held
  // for the next VM start here (warm_memory.h), freed as a new VM or a start begins, and
  // counted as free in Capacity.
  WarmMemory* warm_memory = nullptr;
};

// A lost connection (the daemon killed or restarted; seen by the close callback or by the
// next call) is got back by a Reconnector (reconnector.h) on its own thread, with backoff,
// restarting the daemon first when warren started it (RestartDaemonWith). Meanwhile every
// call fails at once, Unavailable ("VM host unavailable ... reconnecting"); a call in flight
// fails with libvirt's error. Once connected again, the host re-registers its event
// callbacks and runs the OnReconnected hook (the binary's reconcile) before anyone else may
// call it, then reports every VM's state to the WatchStates listener.
class LibvirtHost final : public VmHost {
 public:
  // Connects lazily, on the first call; after a loss, the reconnector does.
  explicit LibvirtHost(LibvirtHostOptions options);
  // Adopts an open connection. Lets tests share one test:///default instance (each
  // connection to it is a private world) with the code under test.
  LibvirtHost(LibvirtHostOptions options, ConnectHandle conn);
  ~LibvirtHost() override;

  std::string uri() const override { return options_.uri; }
  const std::string& peer_uri() const { return options_.peer_uri; }
  // The accelerator its VMs run under, as probed (StartLibvirtHost) or given.
  Accel accel() const { return options_.accel; }
  // Whether the URI names another machine (libvirt_uri.h): see the header comment.
  bool remote() const { return remote_; }
  // Cores and memory from the node (all active domains of the daemon hold memory), disk
  // from the data directory and this host's VMs' disks (each top's virtual size less what it
  // holds already). A figure the host cannot read is INT64_MAX (unknown: no limit).
  Result<HostCapacity> Capacity() override;
  Status Create(const VmSpec& spec) override;
  Status Start(std::string_view id) override;
  Status Stop(std::string_view id) override;
  Status Pause(std::string_view id) override;
  Status Resume(std::string_view id) override;
  Status Restart(std::string_view id) override;
  Status Destroy(std::string_view id) override;
  Status Rename(std::string_view id, std::string_view name) override;
  Result<VmInfo> Inspect(std::string_view id) override;
  // The VM's state alone: two calls to the daemon, where Inspect makes a dozen (its disk chain
  // and metadata); what a control connection's dial asks before it connects.
  Result<VmState> State(std::string_view id);
  // The domains with this host's prefix whose files are in this host's data directory.
  Result<std::vector<VmInfo>> List() override;
  Result<std::string> Console(std::string_view id, int max_lines) override;
  Status Copy(std::string_view source_id, const VmSpec& spec) override;
  Result<ResizeOutcome> Resize(std::string_view id, const ResizeSpec& spec) override;
  Result<int> RemoveUnusedDisks() override;
  // Live and persistent: a hot-plug onto the spare pcie-root-port every domain has, or the
  // link set down (QEMU passes nothing more at once) and then an unplug.
  Result<bool> SetNetwork(std::string_view id, Egress egress) override;
  // libvirt's lifecycle events on the host's connection (libvirt_events.h), filtered to
  // this host's domains and handed over by a VmStateDelivery: its own thread, a bounded
  // queue. Registered before this returns (Unavailable when the daemon cannot be reached);
  // when the connection closes, its close callback makes the delivery thread reconnect
  // (retrying), register again and report every VM's state. Stop of a crashed VM, which
  // libvirt sees as no change (the domain was down already), is reported by the host itself.
  Status WatchStates(VmStateListener listener) override;
  // Templates (libvirt_host_templates.cc), one per shape, in DATA/templates/<VmShapeKey>/:
  //   memory.save    libvirt's save image of the VM (root's; the header's XML is rewritten
  //                  for each clone, never the file: save_image.h)
  //   template.json  shape, tag, when saved, and the base: the VM's disk top at the save,
  //                  left in DATA/disks read-only and kept by DiskChains (pinned) like a layer
  // A template is written under DATA/templates/.new-*, then renamed into place (replacing an
  // older one, moved to .old-* and deleted); dot-directories are what a crash left and go
  // at the next collection. A clone's disk is an overlay on the base; its domain is the saved
  // XML with its own name, UUID, title, metadata, disk, seed, console log, control socket and
  // MAC, fed to virDomainRestoreFlags through a FIFO in DATA/tmp; its persistent definition
  // (the next boot) is DomainXml's, as Create writes it. The chains' lock is held throughout
  // a save or restore, after the VM's lock.
  // CopyLive (libvirt_host_live_copy.cc) forks the source's disk as Copy does, in the same
  // snapshot as its memory (live_copy_memory.h: DATA/tmp/live-<copy id>.save here, the copy's
  // DATA/vms/<copy id>/live.save on a remote host; a save image removed once restored
  // or failed), and restores that as the copy, the way a template's clone is restored.
  Status SaveTemplate(std::string_view id, std::string_view tag) override;
  Result<std::vector<TemplateInfo>> Templates() override;
  Status RemoveTemplate(const VmShape& shape) override;
  Result<RestoredVm> CreateFromTemplate(const VmSpec& spec) override;
  Result<RestoredVm> Reidentify(const VmSpec& spec, const WhileReidentified& meanwhile) override;
  Result<RestoredVm> CopyLive(std::string_view source_id, const VmSpec& spec) override;
  // MigrateTo (libvirt_host_migrate.cc): to another LibvirtHost, through libvirt alone (see
  // that file): the layers through the storage API, a live VM's memory by tunnelled
  // peer-to-peer migration from this host's daemon to the target's URI — which that daemon
  // must be able to open (for a local source, what warren opens; for a remote one, the
  // target's URI as that machine sees it). Holds both hosts' disk chains' locks throughout.
  Result<MigrationReport> MigrateTo(std::string_view id, VmHost& target) override;

  // When the connection is lost and connecting fails, the daemon is started again with
  // these options (EnsureLibvirtd): for a daemon warren started itself. Call before use.
  void RestartDaemonWith(const LibvirtdOptions& daemon);
  // Runs after each reconnection, on the reconnector's thread, before other callers may use
  // the host again (so what it changes on the host races with nothing); an empty one none.
  // Replacing it waits for a run in progress. The binary reconciles here.
  void OnReconnected(std::function<void()> hook);
  // Whether the host is connected (not reconnecting), and what the reconnector counted.
  bool connected() const { return reconnector_->up(); }
  ReconnectorStats reconnect_stats() const { return reconnector_->stats(); }

  // The image versions this host can boot without an upload: its store's (a remote host),
  // or the local catalog's installed ones (a local host). Sorted.
  Result<std::vector<std::string>> Images();
  // Uploads of images to this (remote) host by this object, and the last one's size and time.
  int image_uploads() const { return images_ ? images_->uploads() : 0; }
  ImageUpload last_image_upload() const { return images_ ? images_->last_upload() : ImageUpload{}; }

  // Every running domain of the connection, warren's or not (egress_firewall.h: the
  // isolation rules stay while any QEMU of the host runs).
  Result<int> ActiveDomainCount();

  // The user QEMU runs as on the connection (connecting first if need be); unknown when the
  // daemon cannot be reached or has no DAC model (the test driver, a session daemon).
  QemuUser qemu_user();
  // The directory of a VM's files.
  std::string VmDir(std::string_view id) const;
  // A socket connected to the VM's control port (guest/control_session.h's ControlDialer), or
  // to another of its virtio-serial ports (`port`: kIdentityChannelName): its unix socket,
  // VmDir/control.sock (identity.sock), on a local host; on a remote one the domain's channel,
  // on a libvirt connection of its own (libvirt_channel.h). Unavailable while the port cannot
  // be reached (busy, the host reconnecting, a domain without that port); NotFound without the
  // domain; Conflict when it does not run (the channel only; a local socket is just absent).
  Result<UniqueFd> DialControl(std::string_view id, std::string_view port = kControlChannelName);
  // The directory of every VM's disk layers.
  std::string DisksDir() const;
  // Where this host's VMs' chains end: the local catalog, or the remote host's store.
  std::string HostImagesDir() const;
  // The VM's disk chain, top first, down to (and including) the image's rootfs.
  Result<std::vector<std::string>> DiskChain(std::string_view id);

 private:
  using Conn = std::shared_ptr<virConnect>;
  // A VM's lock, held while this lives (the lock table keeps only a weak reference).
  class VmGuard {
   public:
    explicit VmGuard(std::shared_ptr<std::mutex> mu) : mu_(std::move(mu)), lock_(*mu_) {}

   private:
    std::shared_ptr<std::mutex> mu_;
    std::unique_lock<std::mutex> lock_;
  };
  // What an operation on one existing VM starts with: the connection and the VM's domain,
  // with the VM's lock held while this lives (an empty guard for readers).
  struct OpenVm {
    std::optional<VmGuard> guard;
    Conn conn;
    DomainHandle dom;
  };

  // The connection; Unavailable at once while reconnecting (and a dead one found here starts
  // the reconnection).
  Result<Conn> Connect();
  // The reconnector's steps: a new connection made the host's; the daemon started again;
  // callbacks registered on the new connection and the hook run; every state reported.
  Status Reopen();
  // A connection to the host of the caller's own, for work that may hold one for long: a
  // remote VM's control channel, a migration (libvirtd throttles a client connection as a
  // whole, so on the shared one every other call would wait for it).
  Result<Conn> OwnConnection();
  // A domain's VM id: its name without the domain prefix.
  std::string_view VmIdOf(virDomainPtr dom) const;
  // Puts the emulator cap (domain_xml.h) on every running domain of this host: once per
  // new connection, for those libvirtd started without warren.
  void CapRunningDomains(const Conn& conn);
  Status RestartDaemon();
  void Restored();
  void Reopened();
  VmGuard LockVm(std::string_view id);
  // Locks the VM, connects and looks its domain up. NotFound when there is no such VM.
  Result<OpenVm> LockAndOpen(std::string_view id);
  // Rename's work on a VM opened (and locked) by the caller.
  Status RenameDomain(const OpenVm& vm, std::string_view id, std::string_view name);
  // The same without the lock, for readers that must not wait behind a long Stop.
  Result<OpenVm> Open(std::string_view id);
  std::string DomainName(std::string_view id) const;
  Result<DomainHandle> LookupDomain(const Conn& conn, std::string_view id);
  // Conflict when a VM `id` exists already.
  Status CheckAbsent(const Conn& conn, std::string_view id);
  Result<VmInfo> InfoOf(virDomainPtr dom, std::string_view id);
  // The VM's pool, started over its directory if libvirt does not know it (a restarted
  // daemon forgets transient pools). `build` creates the directory first.
  Result<StoragePoolHandle> OpenPool(const Conn& conn, std::string_view id, bool build);
  // Removes every file of the VM (volumes, then the directory) and its pool.
  Status RemoveFiles(const Conn& conn, std::string_view id);

  // Remote hosts (libvirt_host_remote.cc).
  // The image `ref` as this host boots it: the local catalog's files (made readable by QEMU's
  // user when `qemu` is known), or the remote host's store's, uploaded first if need be.
  Result<GuestImage> HostImage(const Conn& conn, std::string_view ref, const QemuUser& qemu);
  // Local scratch for seeds and host keys (options.scratch_dir).
  std::string ScratchDir() const;
  // The pool over DATA/vms on a remote host; `build` makes the directory.
  Result<StoragePoolHandle> OpenVmsPool(const Conn& conn, bool build);
  // RemoveFiles on a remote host: the VM's volumes, its pool, then its directory (a volume
  // of the DATA/vms pool), and that pool once no VM has a directory.
  Status RemoveRemoteFiles(const Conn& conn, std::string_view id);
  // What is left of VMs that are gone from a remote host (their directories and pools).
  void RemoveRemoteLeftovers(const Conn& conn);
  // Deletes the store's image versions that the local catalog dropped and no VM uses.
  void RemoveDroppedImages(const Conn& conn);
  // Migration (libvirt_host_migrate.cc). Streams volume `source` (on `from`) into `dest` (on
  // `to`), adding what went to *bytes; with `backing`, the qcow2 header's backing file is
  // rewritten to it on the way.
  Status CopyVolume(const Conn& from, virStorageVolPtr source, const Conn& to,
                    virStorageVolPtr dest, const std::string& backing, int64_t* bytes);
  // Copies `layers` (top first) to fresh layers of `target` over `below` (bottom up), undone
  // by `rollback`; returns the new top.
  Result<std::string> CopyLayersTo(const Conn& conn, LibvirtHost& target, const Conn& tconn,
                                   const DiskChains::Lock& tdisks, std::string_view id,
                                   const std::vector<std::string>& layers, std::string below,
                                   uint64_t capacity, const QemuUser& tqemu, Rollback& rollback,
                                   int64_t* bytes);
  // Copies the VM's file `name` (its seed, its console log when it has one) into its
  // directory on `target`, made there first.
  Status CopyVmFileTo(const Conn& conn, LibvirtHost& target, const Conn& tconn, std::string_view id,
                      const char* name, const QemuUser& tqemu, int64_t* bytes);
  Status StartDomain(virDomainPtr dom);
  Result<HostCapacity> CapacityOf(const Conn& conn);
  // CheckHostRoom against the host's capacity now.
  Status CheckRoom(const Conn& conn, const HostDemand& demand);
  // DATA and DATA/vms, traversable by QEMU's user.
  Status EnsureDataDirs();
  // Collects the disk layers no VM uses, then what is left of VMs that are gone (their
  // directories and pools). Call with the chains' lock held.
  Result<int> RemoveUnusedDisksLocked(const Conn& conn, const DiskChains::Lock& disks);
  // The rollback of a Create or Copy cut short (`what`): the new VM's files, then the disks
  // no VM uses any more. Logs what it cannot undo.
  void UndoNewVmFiles(const Conn& conn, std::string_view id, std::string_view what,
                      const DiskChains::Lock& disks);
  // What making a new VM (Create, CreateFromTemplate, CopyLive) holds from its first step to
  // its last: the VM's lock (and a live copy's source's), the connection, the chains' lock,
  // QEMU's user, and the undo steps, the first of which removes the VM's files. Members go in
  // reverse: the undo steps run while the locks are still held.
  struct NewVm {
    explicit NewVm(VmGuard g) : guard(std::move(g)) {}
    VmGuard guard;
    std::optional<VmGuard> source_guard;
    Conn conn;
    std::optional<DiskChains::Lock> disks;
    QemuUser qemu;
    Rollback rollback;
  };
  // Locks the VM, connects, checks no VM of that id exists, takes the chains' lock, checks
  // the host's room, removes files a crash left and prepares the data directories. `what`
  // ("create", "restore") names the operation in the undo step's log.
  // With `source_id`, that VM's lock is held too (a copy's source), both taken in id order
  // as Copy takes them.
  Result<std::unique_ptr<NewVm>> BeginNewVm(const VmSpec& spec, const char* what,
                                            std::string_view source_id = {});
  // A copy's disk fork up to the switch (Copy, CopyLive): the source's top, which both VMs
  // will stand on, and an overlay over it for each.
  struct DiskFork {
    std::string frozen;     // the source's top now
    uint64_t capacity = 0;  // the source's disk, as its guest sees it
    QemuUser qemu;          // whose the new files are (the source's way, see Copy)
    libvirt_ops::NewLayer source_top;
    libvirt_ops::NewLayer copy_top;
    // Set once the source runs on source_top: from then on the rollback keeps it.
    std::shared_ptr<bool> source_top_kept = std::make_shared<bool>(false);
  };
  // With both VMs locked, the chains' lock held and the copy's files undone by `rollback`:
  // Conflict while a running source's disk is being flattened; the host's room for `spec`,
  // whose disk may grow to the source's size while the source's fresh top may hold what the
  // frozen one does again (plus `more_bytes`); then the two overlays, deleted by `rollback`.
  Result<DiskFork> PrepareFork(const Conn& conn, virDomainPtr src, std::string_view source_id,
                               const VmSpec& spec, int64_t more_bytes,
                               const DiskChains::Lock& disks, Rollback& rollback);
  // Builds the VM's seed volume (its identity: seed_image.h) in its pool; returns its path.
  // `rewrite`: writes over the VM's existing seed instead (a pooled VM taking its identity).
  Result<std::string> MakeSeed(const Conn& conn, const VmSpec& spec, const QemuUser& qemu,
                               bool rewrite = false);
  // The domain definition of `spec` over `disk` and `seed`, with a fresh UUID.
  DomainConfig ConfigFor(const VmSpec& spec, const GuestImage& image, const std::string& disk,
                         const std::string& seed, const QemuUser& qemu) const;
  // Builds the seed, defines the domain over `disk` and starts it; undo steps go to
  // `rollback`. Its files are `files_user`'s and libvirt relabels none, unless that user is
  // unknown (then libvirt relabels as by default).
  Status DefineAndStart(const Conn& conn, const VmSpec& spec, const std::string& image_ref,
                        const std::string& disk, const QemuUser& files_user, Rollback& rollback);
  // Graceful shutdown bounded by stop_timeout, then a hard power-off.
  Status ShutDown(virDomainPtr dom);
  // Whether a domain with this host's prefix is this host's: its files are in the data
  // directory (another warren on the same daemon names its domains alike). False when its
  // definition cannot be read (undefined meanwhile).
  Result<bool> HoldsDomain(virDomainPtr dom);

  // Templates (libvirt_host_templates.cc; a remote host's in libvirt_host_remote_templates.cc).
  std::string TemplatesDir() const;
  // The bases of the templates in place (DiskChains' pinned tops); a remote host's listed
  // through `conn`.
  Result<std::vector<std::string>> TemplateBases(virConnectPtr conn);
  // What SaveTemplate saves of running VM `dom`: its shape, `tag`, and its disk top as base.
  Result<TemplateFile> TemplateOf(virDomainPtr dom, std::string_view id, std::string_view tag);
  // The VM a template was saved from (or failed to be): destroyed, undefined, its files gone.
  void RemoveTemplateVm(const OpenVm& vm, std::string_view id);
  // Where a restored VM's memory comes from: a save image open here (a local host's template
  // or live copy's memory: fed through a FIFO), or a volume on a remote host, restored there in
  // place (RestoreOnRemoteHost) — `remote_save` names a template's in the templates pool or,
  // `in_vm_dir`, the VM's own in its directory (a live copy's memory, live_copy_memory.h).
  // `bare_stream`: memory_fd holds QEMU's migration stream alone, no libvirt header (a live
  // copy's here, qemu_memory_migration.h).
  struct RestoreSource {
    int memory_fd = -1;
    std::string remote_save;
    bool in_vm_dir = false;
    bool bare_stream = false;
  };
  // CreateFromTemplate's and its remote twin's common part, once the template, its header and
  // the image are known: the clone's disk over the base, its seed and key, its restore.
  Result<RestoredVm> RestoreClone(const VmSpec& spec, const TemplateFile& t,
                                  const SaveImageHeader& header, const GuestImage& image,
                                  const RestoreSource& source,
                                  std::chrono::steady_clock::time_point t0);
  // virDomainRestoreFlags of `rewritten` fed through a FIFO in DATA/tmp from `source`'s
  // memory_fd (a save image, or with `bare_stream` QEMU's migration stream alone).
  Status RestoreThroughFifo(const Conn& conn, const std::string& id,
                            const SaveImageHeader& rewritten, const RestoreSource& source,
                            const std::string& restoring);
  // A remote host's templates pool: per template "<stem>.save" (the save image) and
  // "<stem>.json" (its TemplateFile, written last). `current` holds the newest complete
  // template of each shape; `stale` the volumes of older, unfinished or broken ones.
  struct RemoteTemplate {
    TemplateFile file;
    std::string json_volume;
  };
  struct RemoteTemplates {
    std::vector<RemoteTemplate> current;
    std::vector<std::string> stale;
  };
  Result<StoragePoolHandle> OpenTemplatesPool(virConnectPtr conn);
  Result<RemoteTemplates> ListRemoteTemplates(virConnectPtr conn);
  Status SaveRemoteTemplate(const OpenVm& vm, std::string_view id, TemplateFile t);
  Status RemoveRemoteTemplate(const VmShape& shape);
  Result<RestoredVm> CreateFromRemoteTemplate(const VmSpec& spec,
                                              std::chrono::steady_clock::time_point t0);
  // The restore on a remote host, from a save image in the VM's directory there: one already
  // there (`in_vm_dir`: a live copy's memory, left for its owner to delete) or a copy of a
  // template's save made there now (virStorageVolCreateXMLFrom; deleted whatever happens).
  // Its header is overwritten in place with `rewritten` (EncodeSaveImageHeaderInPlace), then
  // libvirt restores it from its path: the memory never crosses the network.
  Status RestoreOnRemoteHost(const Conn& conn, const std::string& id,
                             const SaveImageHeader& rewritten, const RestoreSource& source,
                             const std::string& restoring);
  // Deletes a remote host's stale template volumes (ListRemoteTemplates). Call with the
  // chains' lock held (a save in progress holds it too).
  void RemoveRemoteTemplateLeftovers(virConnectPtr conn);
  // Deletes what a save, removal, restore or live copy cut short left (DATA/templates/.new-*,
  // .old-*, DATA/tmp/restore-*.fifo, DATA/tmp/live-*.save), and the scratch of a seed or
  // host key another process was making (DATA/tmp: seed_image.h IsScratchOfAnotherProcess).
  // Call with the chains' lock held.
  void RemoveTemplateLeftovers();
  // The end of CreateFromTemplate and CopyLive: the saved domain `def` (the XML of `header`,
  // whose memory stream `source` holds) made `config`'s — name, UUID, title, metadata,
  // disk, seed, console log, control socket and MAC (when config has one), without the saved
  // run and uncapped — and restored running, through a FIFO in DATA/tmp (a local host: the
  // memory is read once, never copied) or in place on a remote host; then capped, defined for the
  // next boot as DomainXml(config), autostarted and its start recorded. Destroyed and undefined by
  // `rollback`. Unavailable when libvirt refuses the restore (`what`: "from template T"). Returns
  // how long virDomainRestoreFlags took, in ms.
  Result<int64_t> RestoreAsNewDomain(const Conn& conn, const DomainConfig& config,
                                     DomainDefinition def, const SaveImageHeader& header,
                                     const RestoreSource& source, std::string_view what,
                                     Rollback& rollback);
  // CopyLive's snapshot and restore on this machine, the copy's files made (`fork`,
  // `config`): pauses running `src`, snapshots its disk onto fork.source_top, has its QEMU
  // write its memory into `memory_path` (qemu_memory_migration.h), resumes it (also on any
  // way out), then RestoreAsNewDomain restores the copy from that file under `live`, the
  // source's migratable definition. `how` says where the time went. Returns the restore's ms.
  Result<int64_t> StreamLiveCopy(const Conn& conn, virDomainPtr src, std::string_view source_id,
                                 DiskFork& fork, const std::string& memory_path,
                                 const DomainConfig& config, DomainDefinition live,
                                 const std::string& restoring, Rollback& rollback,
                                 std::string* how);

  // WatchStates (libvirt_host_watch.cc).
  // Registers for events on `conn` unless registered there already.
  Status WatchConnection(const Conn& conn);
  // The delivery's full report: connects (again), registers there, lists every VM.
  Result<std::vector<VmStateEvent>> ReportAllStates();
  // Whether an event's VM is this host's (delivery thread; the daemon is asked once per VM).
  bool AdmitEvent(const VmStateEvent& event);
  // Marks `id` as this host's before its domain is defined, so its events are admitted
  // without asking the daemon (which may have removed it again by then).
  void NoteOwnDomain(std::string_view id);
  // Reports a change libvirt has no event for (a crashed VM stopped).
  void ReportState(std::string_view id, VmState state);

  const LibvirtHostOptions options_;
  const bool remote_;
  std::unique_ptr<HostImageStore> images_;  // a remote host's image store; null for a local one
  std::mutex conn_mu_;
  Conn conn_;
  QemuUser qemu_user_;  // of conn_, guarded by conn_mu_
  bool qemu_user_read_ = false;
  bool caps_swept_ = false;  // CapRunningDomains ran on conn_, guarded by conn_mu_
  std::mutex locks_mu_;
  std::map<std::string, std::weak_ptr<std::mutex>, std::less<>> locks_;
  DiskChains chains_;
  // WatchStates. watch_mu_ guards the three below and is never held while the delivery
  // calls out or waits; the delivery and sink exist from the first WatchStates on.
  std::mutex watch_mu_;
  std::unique_ptr<VmStateDelivery> delivery_;
  std::shared_ptr<LifecycleSink> sink_;
  std::unique_ptr<LifecycleRegistration> registration_;
  std::mutex own_mu_;                           // a leaf
  std::set<std::string, std::less<>> own_ids_;  // known to be this host's (AdmitEvent)
  std::mutex daemon_mu_;                        // a leaf; guards daemon_
  std::optional<LibvirtdOptions> daemon_;
  std::mutex hook_mu_;  // held while the hook runs
  std::function<void()> reconnected_hook_;
  // Last: its thread calls into everything above, and it goes first.
  std::unique_ptr<Reconnector> reconnector_;
};

// warren's startup in one call: decides kvm or TCG (ProbeAccel with a kernel from the
// newest image under images_dir; `force_accel` or WARREN_ACCEL override), makes sure the
// daemon answers (EnsureLibvirtd, /dev/kvm masked for TCG), and returns a connected host
// with options.accel set. Logs each decision. Unavailable when no daemon can be had.
// A remote URI: no local probe and no daemon started; the host is connected and asked what
// it offers (ProbeRemoteAccel, bounded), and runs TCG unless forced to kvm.
Result<std::unique_ptr<LibvirtHost>> StartLibvirtHost(LibvirtHostOptions options,
                                                      std::string_view force_accel = "");

}  // namespace warren
