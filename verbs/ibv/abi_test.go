package ibv_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// abiFields lists, for each struct and union of abi.h that crosses into
// rdma-core, the members whose offset and size must match rdma-core's
// headers; a struct whose size is listed too is one this package allocates
// and hands in whole.
var abiFields = []struct {
	typ    string
	whole  bool
	fields string
}{
	{"union ibv_gid", true, "raw global.subnet_prefix global.interface_id"},
	{"struct ibv_gid_entry", true, "gid gid_index port_num gid_type ndev_ifindex"},
	{"struct ibv_device_attr", true, "fw_ver node_guid sys_image_guid max_mr_size page_size_cap vendor_id " +
		"vendor_part_id hw_ver max_qp max_qp_wr device_cap_flags max_sge max_sge_rd max_cq max_cqe max_mr " +
		"max_pd max_qp_rd_atom max_ee_rd_atom max_res_rd_atom max_qp_init_rd_atom max_ee_init_rd_atom " +
		"atomic_cap max_ee max_rdd max_mw max_raw_ipv6_qp max_raw_ethy_qp max_mcast_grp max_mcast_qp_attach " +
		"max_total_mcast_qp_attach max_ah max_fmr max_map_per_fmr max_srq max_srq_wr max_srq_sge max_pkeys " +
		"local_ca_ack_delay phys_port_cnt"},
	// Allocated whole here but filled by ibv_query_port only up to flags.
	{"struct ibv_port_attr", false, "state max_mtu active_mtu gid_tbl_len port_cap_flags max_msg_sz " +
		"bad_pkey_cntr qkey_viol_cntr pkey_tbl_len lid sm_lid lmc max_vl_num sm_sl subnet_timeout " +
		"init_type_reply active_width active_speed phys_state link_layer flags port_cap_flags2"},
	{"struct ibv_async_event", true, "element.cq element.port_num event_type"},
	{"struct ibv_wc", true, "wr_id status opcode vendor_err byte_len imm_data invalidated_rkey qp_num src_qp " +
		"wc_flags pkey_index slid sl dlid_path_bits"},
	{"struct ibv_xrcd_init_attr", true, "comp_mask fd oflags"},
	{"struct ibv_global_route", true, "dgid flow_label sgid_index hop_limit traffic_class"},
	{"struct ibv_ah_attr", true, "grh dlid sl src_path_bits static_rate is_global port_num"},
	{"struct ibv_srq_attr", true, "max_wr max_sge srq_limit"},
	{"struct ibv_srq_init_attr", true, "srq_context attr"},
	{"struct ibv_srq_init_attr_ex", true, "srq_context attr comp_mask srq_type pd xrcd cq tm_cap"},
	{"struct ibv_qp_cap", true, "max_send_wr max_recv_wr max_send_sge max_recv_sge max_inline_data"},
	{"struct ibv_qp_init_attr", true, "qp_context send_cq recv_cq srq cap qp_type sq_sig_all"},
	{"struct ibv_qp_init_attr_ex", true, "qp_context send_cq recv_cq srq cap qp_type sq_sig_all comp_mask pd " +
		"xrcd create_flags max_tso_header rwq_ind_tbl rx_hash_conf source_qpn send_ops_flags"},
	{"struct ibv_qp_attr", true, "qp_state cur_qp_state path_mtu path_mig_state qkey rq_psn sq_psn dest_qp_num " +
		"qp_access_flags cap ah_attr alt_ah_attr pkey_index alt_pkey_index en_sqd_async_notify sq_draining " +
		"max_rd_atomic max_dest_rd_atomic min_rnr_timer port_num timeout retry_cnt rnr_retry alt_port_num " +
		"alt_timeout rate_limit"},
	{"struct ibv_sge", true, "addr length lkey"},
	{"struct ibv_send_wr", true, "wr_id next sg_list num_sge opcode send_flags imm_data invalidate_rkey " +
		"wr.rdma.remote_addr wr.rdma.rkey wr.atomic.remote_addr wr.atomic.compare_add wr.atomic.swap " +
		"wr.atomic.rkey wr.ud.ah wr.ud.remote_qpn wr.ud.remote_qkey qp_type.xrc.remote_srqn bind_mw.mw " +
		"bind_mw.rkey bind_mw.bind_info tso.hdr tso.hdr_sz tso.mss"},
	{"struct ibv_recv_wr", true, "wr_id next sg_list num_sge"},
	{"struct ibv_pd", false, "context handle"},
	{"struct ibv_xrcd", false, "context"},
	{"struct ibv_mr", false, "context pd addr length handle lkey rkey"},
	{"struct ibv_ah", false, "context pd handle"},
	{"struct ibv_comp_channel", false, "context fd refcnt"},
	{"struct ibv_cq", false, "context channel cq_context handle cqe"},
	{"struct ibv_srq", false, "context srq_context pd handle"},
	{"struct ibv_qp", false, "context qp_context pd send_cq recv_cq srq handle qp_num state qp_type"},
	{"struct ibv_context_ops", true, "poll_cq req_notify_cq post_srq_recv post_send post_recv"},
	{"struct ibv_context", true, "device ops cmd_fd async_fd num_comp_vectors mutex abi_compat"},
	{"struct rdma_event_channel", true, "fd"},
	{"struct rdma_cm_id", false, "verbs channel context qp route route.addr.src_addr route.addr.dst_addr ps port_num"},
	{"struct rdma_conn_param", true, "private_data private_data_len responder_resources initiator_depth " +
		"flow_control retry_count rnr_retry_count srq qp_num"},
	{"struct rdma_ud_param", true, "private_data private_data_len ah_attr qp_num qkey"},
	{"struct rdma_cm_event", true, "id listen_id event status param.conn param.ud"},
}

// abiConsts are the enum values abi.h declares.
const abiConsts = "IBV_SYSFS_NAME_MAX IBV_GID_TYPE_IB IBV_GID_TYPE_ROCE_V1 IBV_GID_TYPE_ROCE_V2 IBV_MTU_256 IBV_MTU_4096 IBV_PORT_ACTIVE IBV_ATOMIC_GLOB " +
	"IBV_EVENT_CQ_ERR IBV_EVENT_DEVICE_FATAL IBV_EVENT_SRQ_ERR IBV_EVENT_QP_LAST_WQE_REACHED " +
	"IBV_EVENT_GID_CHANGE IBV_EVENT_WQ_FATAL IBV_WC_SUCCESS IBV_WC_WR_FLUSH_ERR IBV_WC_SEND IBV_WC_RECV " +
	"IBV_QPT_RC IBV_QPT_UC IBV_QPT_UD IBV_QPT_RAW_PACKET IBV_QPT_XRC_SEND IBV_QPT_XRC_RECV " +
	"IBV_QPS_RESET IBV_QPS_RTS IBV_QPS_ERR IBV_QPS_UNKNOWN IBV_MIG_ARMED IBV_QP_STATE IBV_QP_CAP " +
	"IBV_WR_RDMA_WRITE IBV_SEND_INLINE IBV_QP_INIT_ATTR_PD IBV_QP_INIT_ATTR_XRCD " +
	"IBV_SRQT_BASIC IBV_SRQT_XRC IBV_SRQT_TM IBV_SRQ_INIT_ATTR_TYPE IBV_SRQ_INIT_ATTR_PD " +
	"IBV_SRQ_INIT_ATTR_XRCD IBV_SRQ_INIT_ATTR_CQ IBV_XRCD_INIT_ATTR_FD IBV_XRCD_INIT_ATTR_OFLAGS " +
	"RDMA_CM_EVENT_ADDR_RESOLVED RDMA_CM_EVENT_CONNECT_REQUEST RDMA_CM_EVENT_DISCONNECTED " +
	"RDMA_CM_EVENT_TIMEWAIT_EXIT RDMA_PS_IPOIB RDMA_PS_TCP RDMA_PS_UDP RDMA_PS_IB"

// abiLayoutProgram is a C program that prints the layout of abiFields and
// the values of abiConsts as the headers it includes declare them; vctx is
// the verbs_context type those headers name.
func abiLayoutProgram(includes []string, vctx string) string {
	var b strings.Builder
	b.WriteString("#include <stdio.h>\n#include <stddef.h>\n")
	for _, inc := range includes {
		fmt.Fprintf(&b, "#include %s\n", inc)
	}
	b.WriteString("int main(void) {\n")
	for _, s := range abiFields {
		if s.whole {
			fmt.Fprintf(&b, "\tprintf(\"%s: size %%zu\\n\", sizeof(%s));\n", s.typ, s.typ)
		}
		for _, f := range strings.Fields(s.fields) {
			fmt.Fprintf(&b, "\tprintf(\"%s.%s: offset %%zu size %%zu\\n\", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n",
				s.typ, f, s.typ, f, s.typ, f)
		}
	}
	for _, c := range strings.Fields(abiConsts) {
		fmt.Fprintf(&b, "\tprintf(\"%s = %%ld\\n\", (long)%s);\n", c, c)
	}
	// The extended verbs are found by their distance from the end of the
	// verbs_context, which abi.h declares only the tail of.
	for _, op := range strings.Fields("create_qp_ex get_srq_num create_srq_ex open_xrcd close_xrcd sz context") {
		fmt.Fprintf(&b, "\tprintf(\"verbs_context.%s: from the end %%zu\\n\", sizeof(%s) - offsetof(%s, %s));\n",
			op, vctx, vctx, op)
	}
	b.WriteString("\treturn 0;\n}\n")
	return b.String()
}

// TestABIMatchesHeaders compiles the layout program once against abi.h and
// once against rdma-core's own headers, and compares what each prints:
// every offset, size and value this package relies on must be rdma-core's.
// It needs the headers (Debian: libibverbs-dev librdmacm-dev) and a C
// compiler; without them it skips, unless VERBSRT_REQUIRE_RDMA_HEADERS=1
// (test-rxe, after installing them), where it fails.
func TestABIMatchesHeaders(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	required := os.Getenv("VERBSRT_REQUIRE_RDMA_HEADERS") == "1"
	missing := func(why string) {
		if required {
			t.Fatalf("VERBSRT_REQUIRE_RDMA_HEADERS=1 but %s", why)
		}
		t.Skipf("%s: nothing to compare abi.h with", why)
	}
	if _, err := exec.LookPath(cc); err != nil {
		missing("no C compiler (" + cc + ")")
	}
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.c")
	os.WriteFile(probe, []byte("#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\n"), 0o644)
	if out, err := exec.Command(cc, "-fsyntax-only", probe).CombinedOutput(); err != nil {
		missing("rdma-core's headers are not installed: " + strings.TrimSpace(string(out)))
	}
	abiDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, includes []string, vctx string, flags ...string) string {
		src := filepath.Join(dir, name+".c")
		bin := filepath.Join(dir, name)
		if err := os.WriteFile(src, []byte(abiLayoutProgram(includes, vctx)), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{}, flags...), "-o", bin, src)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		return string(out)
	}
	theirs := run("rdmacore", []string{"<infiniband/verbs.h>", "<rdma/rdma_cma.h>"}, "struct verbs_context")
	ours := run("abi", []string{`"abi.h"`}, "struct vrt_verbs_context", "-I", abiDir)
	theirLines, ourLines := strings.Split(theirs, "\n"), strings.Split(ours, "\n")
	if len(theirLines) != len(ourLines) {
		t.Fatalf("%d lines from rdma-core's headers, %d from abi.h", len(theirLines), len(ourLines))
	}
	for i := range theirLines {
		if theirLines[i] != ourLines[i] {
			t.Errorf("abi.h: %s; rdma-core: %s", ourLines[i], theirLines[i])
		}
	}
	t.Logf("%d offsets, sizes and values match rdma-core's headers", len(theirLines)-1)
}
