"""The option names of fio 3.33 (Debian's): ``fio --cmdhelp=all``, their aliases
(``fio --cmdhelp=NAME``) and the options of the common I/O engines (``fio --enghelp=ENGINE``
for libaio, io_uring, psync, sync, posixaio, mmap, null, pvsync, pvsync2, net, splice,
e4defrag, falloc, sg, filecreate, filestat).

``bmx validate`` offers "did you mean" for a ``workload.vars`` key of workload_fio outside
them. It only warns: the host's fio decides (another version, another engine), and ``bmx
check`` asks it (``fio --parse-only``).
"""

from __future__ import annotations

FIO_OPTIONS = frozenset("""
    allow_file_create allow_mounted_write allrandrepeat atomic ba block_error_percentiles blockalign
    blocksize blocksize_range blocksize_unaligned bs bs_unaligned bsrange bssplit
    buffer_compress_chunk buffer_compress_percentage buffer_pattern buffered bwavgtime cgroup
    cgroup_nodelete cgroup_weight clat_percentiles clocksource cmd_type cmdprio cmdprio_bssplit
    cmdprio_class cmdprio_percentage continue_on_error cpumask cpus_allowed cpus_allowed_policy
    create_fsync create_on_open create_only create_serialize dedupe_global dedupe_mode
    dedupe_percentage dedupe_working_set_percentage description direct directory disable_bw
    disable_bw_measurement disable_clat disable_lat disable_slat disk_util do_verify donorname
    end_fsync error_dump exec_postrun exec_prerun exit_what exitall exitall_on_error
    experimental_verify fadvise_hint fallocate fdatasync file_append file_service_type filename
    filename_format fileoffset filesize fill_device fill_fs fixedbufs flow flow_id flow_sleep
    force_async fsync fsync_on_close gid group_reporting gtod_cpu gtod_reduce hipri hipri_percentage
    hostname ignore_error ignore_zone_limits inplace interface invalidate io_limit io_size
    io_submit_mode iodepth iodepth_batch iodepth_batch_complete iodepth_batch_complete_max
    iodepth_batch_complete_min iodepth_batch_submit iodepth_low ioengine iomem iopsavgtime
    ioscheduler job_max_open_zones kb_base lat_percentiles latency_percentile latency_run
    latency_target latency_window listen lockfile lockmem log_alternate_epoch
    log_alternate_epoch_clock_id log_avg_msec log_compression log_compression_cpus log_entries
    log_hist_coarseness log_hist_msec log_max_value log_offset log_prio log_store_compressed
    log_unix_epoch loops max_latency max_open_zones mem merge_blktrace_file merge_blktrace_iters
    merge_blktrace_scalars mss name new_group nice nodelay nonvectored norandommap nowait nr_files
    nrfiles numa_cpu_nodes numa_mem_policy number_ios numjobs offset offset_align offset_increment
    opendir openfiles overwrite per_job_logs percentage_random percentile_list pingpong port
    pre_read prio prioclass profile protocol ramp_time random_distribution random_generator
    randrepeat randseed rate rate_cycle rate_ignore_thinktime rate_iops rate_iops_min rate_min
    rate_process ratecycle ratemin read_beyond_wp read_iolog read_iolog_chunked readfua readwrite
    refill_buffers registerfiles replay_align replay_no_stall replay_redirect replay_scale
    replay_skip replay_time_scale runtime rw rw_sequencer rwmixread rwmixwrite scramble_buffers
    serialize_overlap sg_write_mode significant_figures size slat_percentiles sqthread_poll
    sqthread_poll_cpu ss ss_dur ss_ramp startdelay stat_type stats steadystate steadystate_duration
    steadystate_ramp_time stonewall stream_id sync sync_file_range thinktime thinktime_blocks
    thinktime_blocks_type thinktime_iotime thinktime_spin thp thread time_based timeout trim_backlog
    trim_backlog_batch trim_percentage trim_verify_zero ttl uid uncached unified_rw_reporting
    unique_filename unit_base unlink unlink_each_loop userspace_reap verify verify_async
    verify_backlog verify_backlog_batch verify_dump verify_fatal verify_interval verify_offset
    verify_only verify_pattern verify_state_load verify_state_save wait_for wait_for_previous
    window_size write_barrier write_bw_log write_hint write_hist_log write_iolog write_iops_log
    write_lat_log writefua zero_buffers zone_reset_frequency zone_reset_threshold zonecapacity
    zonemode zonerange zonesize zoneskip
""".split())
