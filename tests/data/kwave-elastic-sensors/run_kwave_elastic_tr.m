% k-Wave's pstdElastic2D time reversal (sensor.time_reversal_boundary_data) on the case of
% tests/physics/test_elastic_time_reversal.py::test_against_kwave (GNU Octave, double precision).
%   python tests/physics/test_elastic_time_reversal.py --inputs DIR     (writes DIR/in.mat)
%   cd DIR && octave-cli run_kwave_elastic_tr.m                         (k-Wave's folder on the
%       path: addpath first)
%   python tests/physics/test_elastic_time_reversal.py --reference DIR  (writes reference.npz here)
% Octave lacks datetime and seconds, which k-Wave's solvers use only to print timings.
1;
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end

d = load('in.mat');
s = double(d.shape);
kgrid = kWaveGrid(s(1), d.dx, s(2), d.dx);
kgrid.setTime(double(d.Nt), d.dt);
medium = struct('sound_speed_compression', d.cp, 'sound_speed_shear', d.cs, 'density', d.rho);
sensor = struct('mask', logical(d.mask), 'time_reversal_boundary_data', d.data);
p_final = pstdElastic2D(kgrid, medium, struct(), sensor, 'PlotSim', false, ...
                        'PMLSize', double(d.pml), 'PMLAlpha', 2);
save('-v7', 'out.mat', 'p_final');
