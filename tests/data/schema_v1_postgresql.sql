-- bakeoff results schema version 1 (postgresql), as created by commit 5f383a8; used to test upgrades.
CREATE TABLE ceilings (
	id SERIAL NOT NULL, 
	fingerprint VARCHAR(32) NOT NULL, 
	device VARCHAR(32) NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	value FLOAT NOT NULL, 
	unit VARCHAR(16) NOT NULL, 
	method TEXT, 
	measured_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	environment JSON, 
	PRIMARY KEY (id)
);

CREATE INDEX ix_ceilings_fingerprint ON ceilings (fingerprint);

CREATE TABLE runs (
	run_id VARCHAR(64) NOT NULL, 
	started_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	ended_at TIMESTAMP WITH TIME ZONE, 
	status VARCHAR(16) NOT NULL, 
	config_name VARCHAR(128), 
	config_path TEXT, 
	config_text TEXT, 
	device VARCHAR(32), 
	fingerprint VARCHAR(32), 
	environment JSON, 
	harness_rev VARCHAR(64), 
	schema_version INTEGER NOT NULL, 
	n_cases INTEGER, 
	PRIMARY KEY (run_id)
);

CREATE INDEX ix_runs_fingerprint ON runs (fingerprint);

CREATE TABLE schema_info (
	key VARCHAR(64) NOT NULL, 
	value VARCHAR(256) NOT NULL, 
	PRIMARY KEY (key)
);

CREATE TABLE records (
	id SERIAL NOT NULL, 
	run_id VARCHAR(64) NOT NULL, 
	case_id VARCHAR(512), 
	workload VARCHAR(128), 
	preset VARCHAR(32), 
	shape VARCHAR(256), 
	dtype VARCHAR(16), 
	backend VARCHAR(64), 
	device VARCHAR(32), 
	status VARCHAR(16), 
	reason TEXT, 
	compile_s FLOAT, 
	compile_warm_s FLOAT, 
	cache_hit_warm BOOLEAN, 
	latency_ms_median FLOAT, 
	latency_ms_p20 FLOAT, 
	latency_ms_p80 FLOAT, 
	latency_iqr_rel FLOAT, 
	n_samples INTEGER, 
	samples JSON, 
	eager_latency_ms_median FLOAT, 
	speedup_vs_eager FLOAT, 
	graph_latency_ms FLOAT, 
	kernel_count INTEGER, 
	device_ms FLOAT, 
	launch_overhead_share FLOAT, 
	err_max_abs_vs_eager FLOAT, 
	err_rel_l2_vs_eager FLOAT, 
	err_max_abs_vs_fp64 FLOAT, 
	err_max_rel_vs_fp64 FLOAT, 
	err_rel_l2_vs_fp64 FLOAT, 
	err_rmse_vs_fp64 FLOAT, 
	err_cosine_vs_fp64 FLOAT, 
	err_ulp_max_vs_fp64 FLOAT, 
	err_ulp_p99_vs_fp64 FLOAT, 
	eager_err_rel_l2_vs_fp64 FLOAT, 
	eager_err_rmse_vs_fp64 FLOAT, 
	err_ratio_vs_eager FLOAT, 
	eager_deterministic BOOLEAN, 
	flops FLOAT, 
	bytes_moved FLOAT, 
	achieved_gbps FLOAT, 
	achieved_tflops FLOAT, 
	pct_of_ceiling FLOAT, 
	break_even_calls FLOAT, 
	details JSON, 
	created_at TIMESTAMP WITH TIME ZONE NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_record_case UNIQUE (run_id, case_id), 
	FOREIGN KEY(run_id) REFERENCES runs (run_id)
);

CREATE INDEX ix_records_run_id ON records (run_id);
