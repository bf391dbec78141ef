package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/verbsrt/verbsrt/internal/provider"
	"github.com/verbsrt/verbsrt/verbs"
)

// runDevices is "verbsrt devices": for each device of the provider (soft by
// default, ibv for rdma-core's), what ibv_devinfo -v prints that verbsrt
// cares about: identity, limits, capability flags, and per port its state,
// MTUs, link layer and the non-empty GIDs among the first -gids, each with
// its type and netdev where the provider reports them.
func runDevices(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices", "usage: verbsrt devices [-provider soft|rocev2|ibv] [-d DEVICE] [-gids N]\n\n"+
		"Lists each device of the provider as ibv_devinfo -v does: identity, limits, capability\n"+
		"flags, and per port its state, MTUs, link layer and non-empty GIDs with their types\n"+
		"(IB, RoCE v1, RoCE v2) and netdevs.")
	spec := providerSpec{name: "soft"}
	addProviderFlags(fs, &spec, "soft, a fabric of two in-process devices")
	dev := fs.String("d", "", "show only this device")
	gids := fs.Int("gids", 16, "how many GID table entries to look at per port (empty ones are not shown)")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if err := resolveProvider(fs, &spec, "soft"); err != nil {
		return usageError{err}
	}
	n := 2 // soft's fabric of two; rocev2: the one device this process would bind
	if spec.name == "rocev2" {
		n = 1
	}
	p, closeProv, err := openProvider(spec, n)
	if err != nil {
		return err
	}
	defer closeProv()
	return devices(stdout, p, *dev, *gids)
}

// devices prints the devices of p (only the one called only, when set):
// what ibv_devinfo -v prints, the limits verbsrt cares about among them.
func devices(w io.Writer, p verbs.Provider, only string, maxGIDs int) error {
	devs, err := p.Devices()
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		fmt.Fprintf(w, "No IB devices found (provider %s)\n", p.Name())
		return nil
	}
	found := false
	for _, d := range devs {
		if only != "" && d.Name() != only {
			continue
		}
		found = true
		if err := device(w, d, maxGIDs); err != nil {
			return fmt.Errorf("%s: %w", d.Name(), err)
		}
	}
	if !found {
		return provider.NoSuchDevice("-d", only, p.Name(), devs)
	}
	return nil
}

func device(w io.Writer, d verbs.Device, maxGIDs int) error {
	ctx, err := d.Open()
	if err != nil {
		return err
	}
	defer ctx.Close()
	a, err := verbs.QueryDeviceEx(ctx)
	if err != nil {
		return err
	}
	row := func(indent, name string, format string, args ...any) {
		fmt.Fprintf(w, "%s%-24s%s\n", indent, name+":", fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "hca_id:\t%s\n", d.Name())
	const t = "\t"
	row(t, "fw_ver", "%s", a.FWVer)
	row(t, "node_guid", "%s", guid(a.NodeGUID))
	row(t, "sys_image_guid", "%s", guid(a.SysImageGUID))
	row(t, "vendor_id", "0x%04x", a.VendorID)
	row(t, "vendor_part_id", "%d", a.VendorPartID)
	row(t, "hw_ver", "0x%x", a.HWVer)
	row(t, "phys_port_cnt", "%d", a.PhysPortCnt)
	row(t, "max_mr_size", "0x%x", a.MaxMRSize)
	row(t, "page_size_cap", "0x%x", a.PageSizeCap)
	row(t, "max_qp", "%d", a.MaxQP)
	row(t, "max_qp_wr", "%d", a.MaxQPWR)
	row(t, "device_cap_flags", "0x%08x (%s)", uint64(a.DeviceCapFlags), capNames(a.DeviceCapFlags))
	row(t, "max_sge", "%d", a.MaxSGE)
	row(t, "max_sge_rd", "%d", a.MaxSGERd)
	row(t, "max_cq", "%d", a.MaxCQ)
	row(t, "max_cqe", "%d", a.MaxCQE)
	row(t, "max_mr", "%d", a.MaxMR)
	row(t, "max_pd", "%d", a.MaxPD)
	row(t, "max_qp_rd_atom", "%d", a.MaxQPRdAtom)
	row(t, "max_qp_init_rd_atom", "%d", a.MaxQPInitRdAtom)
	row(t, "max_srq", "%d", a.MaxSRQ)
	row(t, "max_srq_wr", "%d", a.MaxSRQWR)
	row(t, "max_srq_sge", "%d", a.MaxSRQSGE)
	row(t, "max_ah", "%d", a.MaxAH)
	row(t, "atomic_cap", "%s (%d)", a.AtomicCap, a.AtomicCap)
	if a.Extended {
		row(t, "max_inline_data", "%d", a.MaxInlineData)
	}
	for port := 1; port <= a.PhysPortCnt; port++ {
		pa, err := ctx.QueryPort(uint8(port))
		if err != nil {
			return err
		}
		const tt = "\t\t\t"
		fmt.Fprintf(w, "\t\tport:\t%d\n", port)
		row(tt, "state", "%s (%d)", pa.State, pa.State)
		row(tt, "max_mtu", "%s (%d)", pa.MaxMTU, pa.MaxMTU)
		row(tt, "active_mtu", "%s (%d)", pa.ActiveMTU, pa.ActiveMTU)
		row(tt, "sm_lid", "%d", pa.SMLID)
		row(tt, "port_lid", "%d", pa.LID)
		row(tt, "port_lmc", "0x%02x", pa.LMC)
		row(tt, "link_layer", "%s", pa.LinkLayer)
		row(tt, "max_msg_sz", "0x%x", pa.MaxMsgSz)
		row(tt, "port_cap_flags", "0x%08x", pa.PortCapFlags)
		row(tt, "gid_tbl_len", "%d", pa.GIDTblLen)
		row(tt, "pkey_tbl_len", "%d", pa.PKeyTblLen)
		entries, typed, err := verbs.QueryGIDTable(ctx, uint8(port))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Index >= maxGIDs {
				break
			}
			// As ibv_devinfo -v prints it, with the netdev show_gids adds.
			switch {
			case !typed:
				row(tt, fmt.Sprintf("GID[%3d]", e.Index), "%s", e.GID)
			case e.Netdev == "":
				row(tt, fmt.Sprintf("GID[%3d]", e.Index), "%s, %s", e.GID, e.Type)
			default:
				row(tt, fmt.Sprintf("GID[%3d]", e.Index), "%s, %s, %s", e.GID, e.Type, e.Netdev)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// guid renders a GUID as ibv_devinfo does: four groups of four hex digits.
func guid(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// capFlagNames are enum ibv_device_cap_flags' names, those package verbs
// has no constant for by value.
var capFlagNames = []struct {
	flag verbs.DeviceCap
	name string
}{
	{verbs.DeviceResizeMaxWR, "RESIZE_MAX_WR"}, {verbs.DeviceBadPKeyCntr, "BAD_PKEY_CNTR"},
	{verbs.DeviceBadQKeyCntr, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"}, {verbs.DeviceAutoPathMig, "AUTO_PATH_MIG"},
	{1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"}, {verbs.DeviceCurrQPStateMod, "CURR_QP_STATE_MOD"},
	{1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"}, {verbs.DevicePortActiveEvent, "PORT_ACTIVE_EVENT"},
	{verbs.DeviceSysImageGUID, "SYS_IMAGE_GUID"}, {verbs.DeviceRCRNRNAKGen, "RC_RNR_NAK_GEN"},
	{verbs.DeviceSRQResize, "SRQ_RESIZE"}, {verbs.DeviceNNotifyCQ, "N_NOTIFY_CQ"},
	{verbs.DeviceMemWindow, "MEM_WINDOW"}, {verbs.DeviceUDIPCsum, "UD_IP_CSUM"}, {verbs.DeviceXRC, "XRC"},
	{verbs.DeviceMemMgtExtensions, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"},
	{verbs.DeviceMemWindowType2B, "MEM_WINDOW_TYPE_2B"}, {verbs.DeviceRCIPCsum, "RC_IP_CSUM"},
	{verbs.DeviceRawIPCsum, "RAW_IP_CSUM"}, {1 << 29, "MANAGED_FLOW_STEERING"},
}

// capNames names the known flags of c, and how many unknown bits remain.
func capNames(c verbs.DeviceCap) string {
	var names []string
	for _, f := range capFlagNames {
		if c&f.flag != 0 {
			names = append(names, f.name)
			c &^= f.flag
		}
	}
	if c != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint64(c)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}
